"""Cron expressions: parsing, and the next fire time in an IANA time zone (DESIGN G9).

Five fields, six with seconds first, or seven with seconds first and a year last (Quartz).
Besides plain values, lists, ranges and steps, the day fields take Quartz's day forms (``L``,
``L-n``, ``LW``, ``nW`` in day-of-month; ``d#n``, ``dL`` in day-of-week: see
:mod:`tickwork.schedules.cron_days`). Expressions without those forms and without a year take
the fast path, a check of two masks per day; the others find their days a month at a time.

Pure code. Instants are integer POSIX seconds; a *wall* time is the same count of seconds
for the local calendar reading (seconds since 1970-01-01 00:00 on the local clock).

DST rule (Debian cron, cronie, cronsim): a fixed-time expression (second, minute and hour
all specific: no ``*`` and no step) fires once per matching local time. A time skipped by DST
fires at the first instant after the gap, a repeated time fires at its first instance. Every
other expression fires at each real instant whose local time matches.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from tickwork.errors import ValidationError
from tickwork.schedules.cron_days import (
    LAST,
    LAST_OF,
    LAST_WEEKDAY,
    NEAREST,
    NTH,
    DayFields,
    DayForm,
    first_weekday,
    month_length,
)
from tickwork.schedules.words import MONTH_WORDS, join_values

FIELD = "schedule.cron"
DAY = 86_400
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
# Search horizon, a backstop: the Gregorian calendar repeats every 400 years, and an expression
# that never fires (`0 0 30 2 *`) is refused when compiled, so every search ends well before it.
# The longest real gaps: decades (`0 0 ? 2 5#5`, a fifth Friday in February; a year field).
HORIZON = 400 * 366 * DAY
# The wall seconds the search considers, keeping clear of datetime's year 1 and 9999 limits.
MIN_WALL = (date(1, 1, 3).toordinal() - EPOCH_ORDINAL) * DAY
MAX_WALL = (date(9999, 12, 30).toordinal() - EPOCH_ORDINAL) * DAY

MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN",
               "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True, slots=True)
class _FieldDef:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_base: int = 0  # the number of names[0]
    question: bool = False  # accepts `?` as `*`


SECOND = _FieldDef("second", 0, 59)
MINUTE = _FieldDef("minute", 0, 59)
HOUR = _FieldDef("hour", 0, 23)
DOM = _FieldDef("day-of-month", 1, 31, question=True)
MONTH = _FieldDef("month", 1, 12, MONTH_NAMES, 1)
DOW = _FieldDef("day-of-week", 0, 7, DAY_NAMES, 0, question=True)
YEAR = _FieldDef("year", 1970, 2199)


def _error(reason: str) -> ValidationError:
    return ValidationError(FIELD, reason)


def _value(text: str, fd: _FieldDef) -> int:
    """One number or name of a field, range-checked."""
    if text.isascii() and text.isdigit():
        value = int(text)
        if not fd.low <= value <= fd.high:
            raise _error(f"field '{fd.name}' value {value} is out of range {fd.low}-{fd.high}")
        return value
    if text.upper() in fd.names:
        return fd.names.index(text.upper()) + fd.name_base
    if text == "":
        raise _error(f"field '{fd.name}' has an empty value")
    kind = " or a name" if fd.names else ""
    raise _error(f"field '{fd.name}' value '{text}' is not a number{kind} it accepts")


def parse_field(text: str, fd: _FieldDef) -> frozenset[int]:
    """The set of values one cron field selects (day-of-week 7 becomes 0, Sunday)."""
    values: set[int] = set()
    for item in _items(text, fd):
        values.update(_parse_item(item, fd))
    if fd is DOW and 7 in values:
        values.discard(7)
        values.add(0)
    return frozenset(values)


def parse_day_field(text: str, fd: _FieldDef) -> tuple[frozenset[int], tuple[DayForm, ...]]:
    """A day field's plain values and its day forms (``L``, ``15W``, ``FRI#2``, ``5L``, ...)."""
    plain: list[str] = []
    forms: dict[DayForm, None] = {}
    for item in _items(text, fd):
        form = _dom_form(item) if fd is DOM else _dow_form(item)
        if form is None:
            plain.append(item)
        else:
            forms[form] = None
    return (parse_field(",".join(plain), fd) if plain else frozenset()), tuple(forms)


def _items(text: str, fd: _FieldDef) -> list[str]:
    items = text.split(",")
    if "" in items:
        raise _error(f"field '{fd.name}' has an empty list item in '{text}'")
    return items


def _parse_item(item: str, fd: _FieldDef) -> range:
    """The values of one list item: a value, a range, ``*`` or ``?``, each with a step."""
    base, slash, step_text = item.partition("/")
    if base in ("*", "?"):
        if base == "?" and not fd.question:
            raise _error(f"field '{fd.name}' does not accept '?'")
        low, high = fd.low, fd.high
    elif "-" in base:
        low_text, _, high_text = base.partition("-")
        low, high = _value(low_text, fd), _value(high_text, fd)
        if low > high:
            raise _error(f"field '{fd.name}' range '{base}' starts after it ends")
    else:
        low = _value(base, fd)
        high = fd.high if slash else low
    step = 1
    if slash:
        span = fd.high - fd.low + 1
        if not (step_text.isascii() and step_text.isdigit()) or not 1 <= int(step_text) <= span:
            raise _error(f"field '{fd.name}' step '{step_text}' must be a whole number "
                         f"from 1 to {span}")
        step = int(step_text)
    return range(low, high + 1, step)


def _dom_form(item: str) -> DayForm | None:
    """``L``, ``L-n``, ``LW`` or ``nW``; None for a plain item."""
    text = item.upper()
    if text == "L":
        return DayForm(LAST)
    if text == "LW":
        return DayForm(LAST_WEEKDAY)
    if text.startswith("L-"):
        n = text[2:]
        if not (n.isascii() and n.isdigit()) or not 1 <= int(n) <= 30:
            raise _error(f"field 'day-of-month' value '{item}': the days before the last "
                         "('L-n') must be a whole number from 1 to 30")
        return DayForm(LAST, int(n))
    if text.endswith("W") and text[:-1].isascii() and text[:-1].isdigit():
        return DayForm(NEAREST, _value(text[:-1], DOM))
    if "L" in text or "W" in text:
        raise _error(f"field 'day-of-month' value '{item}' is not a form it accepts (a number, "
                     "range or step, or one of 'L', 'L-n', 'LW', 'nW'; these take no range "
                     "or step)")
    return None


def _dow_form(item: str) -> DayForm | None:
    """``d#n`` or ``dL`` (d a number or a name); None for a plain item."""
    text = item.upper()
    if "#" in text:
        day, _, week = text.partition("#")
        weekday = _value(day, DOW) % 7
        if not (week.isascii() and week.isdigit()) or not 1 <= int(week) <= 5:
            raise _error(f"field 'day-of-week' value '{item}': the week after '#' must be a "
                         "whole number from 1 to 5")
        return DayForm(NTH, weekday, int(week))
    if text.endswith("L"):
        if text == "L":
            raise _error("field 'day-of-week' value 'L' needs a weekday before it ('5L' or "
                         "'FRIL': the last Friday of the month); the last day of the month is "
                         "'L' in day-of-month")
        return DayForm(LAST_OF, _value(text[:-1], DOW) % 7)
    return None


def _mask(values: frozenset[int]) -> int:
    mask = 0
    for v in values:
        mask |= 1 << v
    return mask


def _is_star(text: str) -> bool:
    return text.startswith(("*", "?"))


def _is_specific(text: str) -> bool:
    return "*" not in text and "/" not in text


class CronExpr:
    """A compiled cron expression evaluated in one time zone (None means UTC)."""

    __slots__ = ("_by_month", "_days", "_dom_forms", "_dom_mask", "_dow_forms", "_dow_mask",
                 "_hours", "_kinds", "_minutes", "_month_mask", "_seconds", "_year_set", "_years",
                 "day_or", "fields", "fixed", "has_seconds", "text", "tz", "year_field")

    def __init__(self, text: str, tz: ZoneInfo | None) -> None:
        self.text = text
        self.tz = tz
        expr = text.strip()
        if expr.startswith("@"):
            alias = expr.lower()
            if alias not in ALIASES:
                known = ", ".join(ALIASES)
                raise _error(f"unknown alias '{expr}' (known: {known})")
            expr = ALIASES[alias]
        parts = expr.split()
        if len(parts) not in (5, 6, 7):
            raise _error(f"expected 5, 6 or 7 fields, got {len(parts)}")
        self.has_seconds = len(parts) >= 6
        if not self.has_seconds:
            parts.insert(0, "0")
        self.year_field = parts.pop() if len(parts) == 7 else "*"
        self.fields = tuple(parts)
        sec, minute, hour, dom, month, dow = parts
        self._seconds = tuple(sorted(parse_field(sec, SECOND)))
        self._minutes = tuple(sorted(parse_field(minute, MINUTE)))
        self._hours = tuple(sorted(parse_field(hour, HOUR)))
        dom_values, self._dom_forms = parse_day_field(dom, DOM)
        dow_values, self._dow_forms = parse_day_field(dow, DOW)
        self._dom_mask = _mask(dom_values)
        self._month_mask = _mask(parse_field(month, MONTH))
        self._dow_mask = _mask(dow_values)
        years = parse_field(self.year_field, YEAR)
        self._years = None if self.year_field == "*" else tuple(sorted(years))
        self._year_set = years
        # Day forms and years take the month-at-a-time search; the rest, the per-day masks.
        self._by_month = bool(self._dom_forms or self._dow_forms or self._years is not None)
        self._kinds: dict[int, int] = {}  # month kind (length, weekday of the 1st) -> its days
        # Vixie cron: both day fields restricted (neither starts with `*` or `?`) means OR.
        self.day_or = not _is_star(dom) and not _is_star(dow)
        self.fixed = _is_specific(sec) and _is_specific(minute) and _is_specific(hour)
        self._days = DayFields(self._dom_mask, self._dom_forms, self._dow_mask, self._dow_forms,
                               self.day_or)
        self._check_some_day()

    def _check_some_day(self) -> None:
        """Refuse a schedule that can never fire, such as the 30th of February.

        Which days match in a month depends only on its kind: its length and the weekday of
        its 1st. Without a year field every kind of each month comes round (February: 28 or
        29 days); with one, only the kinds of the months of those years count.
        """
        months = [m for m in range(1, 13) if (self._month_mask >> m) & 1]
        if self._years is None:
            kinds = {(length, first) for m in months for first in range(7)
                     for length in ((28, 29) if m == 2 else (month_length(2001, m),))}
        else:
            kinds = {(month_length(y, m), first_weekday(y, m)) for y in self._years for m in months}
        if any(self._kind_days(length, first) for length, first in kinds):
            return
        dom, month, dow = self.fields[3:]
        days = [d for d in range(1, 32) if (self._dom_mask >> d) & 1]
        if not self.day_or and not self._dom_forms and self._years is None and days:
            named = " or ".join(str(day) for day in days)
            raise _error(f"never fires: none of its months has a day {named} "
                         "(a job on such a schedule would never run)")
        named_fields = [f"field '{name}' '{text}'"
                        for name, text in (("day-of-month", dom), ("day-of-week", dow))
                        if not _is_star(text)]
        link = " or " if self.day_or else " and "
        place = []
        if not _is_star(month):
            place.append(join_values(months, MONTH_WORDS, 1, "or"))
        if self._years is not None:
            place.append(join_values(list(self._years), word="or"))
        where = " of ".join(place) if place else "any month"
        from tickwork.schedules.cron_words import day_phrases  # noqa: PLC0415  (it imports this module)

        what = link.join(day_phrases(self, dom, dow))
        raise _error(f"never fires: no day in {where} is {what} ({link.join(named_fields)}), "
                     "so a job on such a schedule would never run")

    # -- calendar search on wall seconds --------------------------------------------------

    def _day_matches(self, d: date) -> bool:
        dom = (self._dom_mask >> d.day) & 1
        dow = (self._dow_mask >> (d.isoweekday() % 7)) & 1
        return bool(dom | dow) if self.day_or else bool(dom & dow)

    def _kind_days(self, length: int, first: int) -> int:
        """The days (bit d: day d) of a month of ``length`` days whose 1st is weekday ``first``."""
        key = length * 8 + first
        found = self._kinds.get(key)
        if found is None:
            found = self._kinds[key] = self._days.month_days(length, first)
        return found

    def _time_at_or_after(self, sod: int) -> int | None:
        """The first matching second of the day at or after ``sod``, or None."""
        hours, minutes, seconds = self._hours, self._minutes, self._seconds
        h, rest = divmod(sod, 3600)
        m, s = divmod(rest, 60)
        i = bisect_left(hours, h)
        if i == len(hours):
            return None
        if hours[i] == h:
            j = bisect_left(minutes, m)
            if j < len(minutes) and minutes[j] == m:
                k = bisect_left(seconds, s)
                if k < len(seconds):
                    return h * 3600 + m * 60 + seconds[k]
                j += 1
            if j < len(minutes):
                return h * 3600 + minutes[j] * 60 + seconds[0]
            i += 1
            if i == len(hours):
                return None
        return hours[i] * 3600 + minutes[0] * 60 + seconds[0]

    def _next_month_start(self, d: date) -> int:
        """Day number (since 1970) of the first day of the next selected month after d's."""
        year, month = d.year, d.month
        for _ in range(12):
            month += 1
            if month > 12:
                year, month = year + 1, 1
            if (self._month_mask >> month) & 1:
                break
        if year > 9999:
            return MAX_WALL // DAY + 1
        return date(year, month, 1).toordinal() - EPOCH_ORDINAL

    def next_wall(self, start: int, stop: int) -> int | None:
        """The first matching wall second in ``[start, stop)``, or None."""
        if self._by_month:
            return self._next_wall_by_month(start, stop)
        stop = min(stop, MAX_WALL)
        days, sod = divmod(start, DAY)
        last_day = (stop - 1) // DAY
        while days <= last_day:
            d = date.fromordinal(EPOCH_ORDINAL + days)
            if not (self._month_mask >> d.month) & 1:
                days, sod = self._next_month_start(d), 0
                continue
            if self._day_matches(d):
                t = self._time_at_or_after(sod)
                if t is not None:
                    wall = days * DAY + t
                    return wall if wall < stop else None
            days, sod = days + 1, 0
        return None

    def _next_wall_by_month(self, start: int, stop: int) -> int | None:
        """``next_wall`` for day forms and years: each month's days come as one mask."""
        stop = min(stop, MAX_WALL)
        days, sod = divmod(start, DAY)
        last_day = (stop - 1) // DAY
        years = self._years
        while days <= last_day:
            d = date.fromordinal(EPOCH_ORDINAL + days)
            if years is not None and d.year not in self._year_set:
                i = bisect_right(years, d.year)
                if i == len(years):
                    return None
                days, sod = date(years[i], 1, 1).toordinal() - EPOCH_ORDINAL, 0
                continue
            if (self._month_mask >> d.month) & 1:
                left = self._kind_days(month_length(d.year, d.month),
                                       first_weekday(d.year, d.month)) >> d.day
                while left:  # bit 0 is day d itself
                    day = days + (left & -left).bit_length() - 1
                    if day > last_day:
                        return None
                    t = self._time_at_or_after(sod if day == days else 0)
                    if t is not None:
                        wall = day * DAY + t
                        return wall if wall < stop else None
                    left &= left - 1
            days, sod = self._next_month_start(d), 0
        return None

    # -- time zone -------------------------------------------------------------------------

    def _offset_at(self, ts: int) -> tuple[int, int]:
        """(UTC offset in seconds, fold) of the local reading of instant ``ts``."""
        dt = datetime.fromtimestamp(ts, self.tz)
        return _seconds(dt.utcoffset()), dt.fold

    def _wall_offsets(self, wall: int) -> tuple[int, int]:
        """The offsets zoneinfo gives a wall time with fold=0 and fold=1.

        Equal: an ordinary time. First larger: a repeated time (two instants).
        First smaller: a time in a DST gap (no instant).
        """
        days, sod = divmod(wall, DAY)
        d = date.fromordinal(EPOCH_ORDINAL + days)
        h, rest = divmod(sod, 3600)
        m, s = divmod(rest, 60)
        dt = datetime(d.year, d.month, d.day, h, m, s, tzinfo=self.tz)
        return _seconds(dt.utcoffset()), _seconds(dt.replace(fold=1).utcoffset())

    def _transition_after(self, low: int, high: int) -> int:
        """The first instant in ``(low, high]`` whose offset differs from ``low``'s."""
        base = self._offset_at(low)[0]
        while high - low > 1:
            mid = (low + high) // 2
            if self._offset_at(mid)[0] == base:
                low = mid
            else:
                high = mid
        return high

    def _resolve_fixed(self, wall: int) -> int:
        """The one instant a fixed-time wall reading fires at (G9)."""
        off0, off1 = self._wall_offsets(wall)
        if off0 >= off1:
            return wall - off0  # ordinary, or the first instance of a repeated time
        return self._transition_after(wall - off1, wall - off0)  # skipped: end of the gap

    def next_after(self, after: int) -> int | None:
        """The first fire instant strictly after instant ``after`` (seconds), or None."""
        after = max(after, MIN_WALL)
        if after >= MAX_WALL:
            return None
        if self.tz is None:
            return self.next_wall(after + 1, after + 1 + HORIZON)
        if self.fixed:
            return self._next_fixed(after)
        return self._next_real(after)

    def _next_fixed(self, after: int) -> int | None:
        wall = after + self._offset_at(after)[0]
        stop = wall + HORIZON
        while (found := self.next_wall(wall + 1, stop)) is not None:
            instant = self._resolve_fixed(found)
            if instant > after:
                return instant
            wall = found  # a first instance already past (``after`` is in the repeat)
        return None

    def _next_real(self, after: int) -> int | None:
        offset, fold = self._offset_at(after)
        wall_after = after + offset
        stop = wall_after + HORIZON
        best: int | None = None
        wall = wall_after + 1
        while (found := self.next_wall(wall, stop)) is not None:
            off0, off1 = self._wall_offsets(found)
            if off0 < off1:  # in a gap: no instant has this reading; resume after the gap
                gap_end = self._transition_after(found - off1, found - off0)
                wall = gap_end + off1
                continue
            later = [i for i in {found - off0, found - off1} if i > after]
            if later:
                best = min(later)
                break
            wall = found + 1
        if fold == 0:
            # ``after`` in the first pass of a repeated hour: the readings up to now repeat.
            second_offset = self._wall_offsets(wall_after)[1]
            if second_offset < offset:
                change = self._transition_after(after, after + offset - second_offset)
                repeat = self.next_wall(change + second_offset, wall_after + 1)
                if repeat is not None and (best is None or repeat - second_offset < best):
                    best = repeat - second_offset
        return best

    # -- description -------------------------------------------------------------------------

    def describe(self) -> str:
        """Plain English, best effort: "at 03:00 every day", "every 15 minutes"."""
        from tickwork.schedules.cron_words import describe  # noqa: PLC0415  (it imports this module)

        return describe(self)


def _seconds(offset: timedelta | None) -> int:
    return 0 if offset is None else offset.days * DAY + offset.seconds
