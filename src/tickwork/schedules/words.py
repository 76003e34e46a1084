"""Words for schedules' descriptions: month and day names, lists joined as people write them."""

from __future__ import annotations

MONTH_WORDS = ("January", "February", "March", "April", "May", "June", "July",
               "August", "September", "October", "November", "December")
DAY_WORDS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def clock(h: int, m: int, s: int) -> str:
    return f"{h:02d}:{m:02d}" + (f":{s:02d}" if s else "")


def join(items: list[str], word: str = "and") -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {word} " + items[-1]


def join_values(values: list[int], words: tuple[str, ...] = (), base: int = 0,
                 word: str = "and") -> str:
    """``[1, 2, 3, 4, 9]`` -> "1 through 4 and 9", with names when ``words`` are given."""
    def name(v: int) -> str:
        return words[v - base] if words else str(v)

    runs: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j - i >= 2:
            runs.append(f"{name(values[i])} through {name(values[j])}")
        else:
            runs.extend(name(v) for v in values[i:j + 1])
        i = j + 1
    return join(runs, word)
