"""The day forms beyond plain cron (Quartz's): ``L``, ``L-n``, ``LW``, ``nW``, ``d#n``, ``dL``.

Pure code. Each form picks at most one day of a month, and which day depends only on the
month's length and the weekday of its 1st. So a day field's days in a month are a bit mask
(bit ``d`` for day ``d``) that :func:`month_days` computes from those two numbers; there are 28
kinds of month (lengths 28-31, seven weekdays), and the cron engine caches one mask per kind.

Weekdays are numbered as in the day-of-week field: 0 is Sunday, 6 is Saturday.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from tickwork.schedules.words import DAY_WORDS

SATURDAY, SUNDAY = 6, 0
ORDINALS = ("first", "second", "third", "fourth", "fifth")

# The kinds of DayForm.
LAST = "last"                  # L, L-n: n days before the last day of the month
LAST_WEEKDAY = "last_weekday"  # LW: the last Monday-to-Friday of the month
NEAREST = "nearest"            # nW: the Monday-to-Friday nearest day n, within the month
NTH = "nth"                    # d#n: the n-th weekday d of the month
LAST_OF = "last_of"            # dL: the last weekday d of the month


@dataclass(frozen=True, slots=True)
class DayForm:
    """One special item of a day field."""

    kind: str
    value: int = 0  # LAST: days before the last; NEAREST: the day; NTH, LAST_OF: the weekday
    week: int = 0   # NTH: n, from 1 to 5

    def day(self, length: int, first: int) -> int:
        """The day it picks in a month of ``length`` days whose 1st is weekday ``first``;
        0 when the month has no such day (a fifth Friday, the 31st)."""
        return _PICK[self.kind](self, length, first)

    def words(self) -> str:
        """"the last day", "the weekday nearest the 15th", "the second Friday"."""
        if self.kind == LAST:
            if self.value == 0:
                return "the last day"
            before = "the day" if self.value == 1 else f"the {ordinal(self.value)} day"
            return f"{before} before the last day"
        if self.kind == LAST_WEEKDAY:
            return "the last weekday"
        if self.kind == NEAREST:
            return f"the weekday nearest the {ordinal(self.value)}"
        if self.kind == NTH:
            return f"the {ORDINALS[self.week - 1]} {DAY_WORDS[self.value]}"
        return f"the last {DAY_WORDS[self.value]}"


def ordinal(n: int) -> str:
    """``1`` -> "1st", ``12`` -> "12th", ``22`` -> "22nd"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def month_length(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def first_weekday(year: int, month: int) -> int:
    """The weekday of the month's 1st, 0 = Sunday."""
    return date(year, month, 1).isoweekday() % 7


def _last(form: DayForm, length: int, first: int) -> int:
    return max(length - form.value, 0)


def _last_weekday(form: DayForm, length: int, first: int) -> int:
    weekday = (first + length - 1) % 7
    return length - {SATURDAY: 1, SUNDAY: 2}.get(weekday, 0)


def _nearest(form: DayForm, length: int, first: int) -> int:
    day = form.value
    if day > length:
        return 0
    weekday = (first + day - 1) % 7
    if weekday == SATURDAY:
        return day + 2 if day == 1 else day - 1  # never back into the previous month
    if weekday == SUNDAY:
        return day - 2 if day == length else day + 1  # nor on into the next
    return day


def _nth(form: DayForm, length: int, first: int) -> int:
    day = 1 + (form.value - first) % 7 + 7 * (form.week - 1)
    return day if day <= length else 0


def _last_of(form: DayForm, length: int, first: int) -> int:
    return length - (first + length - 1 - form.value) % 7


_PICK = {LAST: _last, LAST_WEEKDAY: _last_weekday, NEAREST: _nearest, NTH: _nth,
         LAST_OF: _last_of}


@dataclass(frozen=True, slots=True)
class DayFields:
    """The two day fields: plain values as masks (bit d: day d; bit w: weekday w), the forms,
    and how they join: OR when both are restricted, else AND."""

    dom_mask: int
    dom_forms: tuple[DayForm, ...]
    dow_mask: int
    dow_forms: tuple[DayForm, ...]
    day_or: bool

    def month_days(self, length: int, first: int) -> int:
        """The days selected in a month of ``length`` days whose 1st is weekday ``first``."""
        days = (1 << (length + 1)) - 2  # bits 1..length
        dom = self.dom_mask & days
        for form in self.dom_forms:
            dom |= 1 << form.day(length, first)
        # The weekday pattern of days 1-7, repeated over the five weeks a month touches.
        week = 0
        for day in range(1, 8):
            week |= ((self.dow_mask >> ((first + day - 1) % 7)) & 1) << day
        dow = (week | week << 7 | week << 14 | week << 21 | week << 28) & days
        for form in self.dow_forms:
            dow |= 1 << form.day(length, first)
        # A form that picked no day set bit 0, which is never a day.
        return ((dom | dow) if self.day_or else (dom & dow)) & days
