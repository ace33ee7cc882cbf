"""The live log: a scroll view that draws only the rows on screen, each from a plain string
in the ring (`tui.lines`), styled by its severity with the finding's captured values
highlighted. It follows the end while the view is at the bottom; scrolled up, it stays where
it is and counts the lines that arrived since."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from logwatch.core.safe_text.visible import visible
from logwatch.tui.lines import Line, LineRing, as_drawn
from logwatch.tui.render import SEVERITY_STYLE

_STYLES = {name: Style.parse(spec) if spec else Style() for name, spec in
           SEVERITY_STYLE.items()}
_CAPTURE = Style(reverse=True, bold=True)
_CURSOR = Style(bgcolor="grey23")
_GUTTER = Style(dim=True)
_BLANK = Style()


class LogView(ScrollView, can_focus=True):
    """Rows of `ring`'s filtered view; `cursor`: the row `e`/`w` jumps to and `c` copies."""

    DEFAULT_CSS = "LogView { height: 1fr; }"

    class Moved(Message):
        """Following changed, or lines arrived while not following."""

    def __init__(self, ring: LineRing, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ring = ring
        self.following = True
        self.new_lines = 0  # arrived while not following
        self.cursor: int | None = None
        self._base = ring.base
        self._width = 80

    def lines_arrived(self, count: int) -> None:
        """Called after lines were added to the ring (in batches, not per line)."""
        trimmed = self.ring.base - self._base
        self._base = self.ring.base
        self.virtual_size = Size(max(self._width, self.size.width), len(self.ring))
        if self.following:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        else:
            self.new_lines += count
            if trimmed and not self.ring.filter.active:  # keep the same lines in view
                self.scroll_to(y=max(0, self.scroll_y - trimmed), animate=False,
                               immediate=True)
                if self.cursor is not None:
                    self.cursor = max(0, self.cursor - trimmed)
            self.post_message(self.Moved())
        self.refresh()

    def view_changed(self) -> None:
        """The filter changed: the rows are others."""
        self.cursor = None
        self.virtual_size = Size(max(self._width, self.size.width), len(self.ring))
        if self.following:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.refresh()

    def follow(self) -> None:
        self.following, self.new_lines, self.cursor = True, 0, None
        self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.post_message(self.Moved())
        self.refresh()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        at_end = new >= self.max_scroll_y
        if at_end != self.following:
            self.following = at_end
            if at_end:
                self.new_lines = 0
            self.post_message(self.Moved())

    def jump(self, row: int) -> None:
        """Put the cursor on `row`, scrolled into the middle of the view."""
        self.cursor = row
        self.following = False
        self.scroll_to(y=max(0, row - self.size.height // 2), animate=False, immediate=True)
        self.post_message(self.Moved())
        self.refresh()

    def current_row(self) -> int:
        """The cursor's row, else the last row on screen."""
        if self.cursor is not None:
            return self.cursor
        return min(len(self.ring) - 1, int(self.scroll_y) + self.size.height - 1)

    def render_line(self, y: int) -> Strip:
        row = int(self.scroll_y) + y
        width = self.size.width
        # every cell with a style, blanks too (an empty one: the widget's colours show, as
        # before): under NO_COLOR Textual's monochrome filter reads each segment's colour,
        # and a segment without a style crashed the app
        background = _BLANK
        if row >= len(self.ring):
            return Strip.blank(width, background)
        line = self.ring.row(row)
        strip = Strip(self._segments(line, row == self.cursor))
        return strip.crop_extend(int(self.scroll_x), int(self.scroll_x) + width, background)

    def _segments(self, line: Line, at_cursor: bool) -> list[Segment]:
        text = visible(as_drawn(line.text).expandtabs())
        severity = self.ring.severity(line)
        style = _STYLES.get(severity or "info", Style())
        if at_cursor:
            style = style + _CURSOR
        gutter = Segment(f"{line.number:>7} ", _GUTTER)
        mark = self.ring.marks.get((line.source, line.number))
        if mark is None or not mark.captures:
            return [gutter, Segment(text, style)]
        spans: list[Segment] = [gutter]
        at = 0
        for start, end in _capture_spans(text, mark.captures):
            if start < at:
                continue
            spans += [Segment(text[at:start], style), Segment(text[start:end], style + _CAPTURE)]
            at = end
        spans.append(Segment(text[at:], style))
        return spans


def _capture_spans(text: str, values: tuple[str, ...]) -> list[tuple[int, int]]:
    """Where the captured values stand in the line (first occurrence each), in order."""
    found = []
    for value in values:
        if value and (at := text.find(value)) >= 0:
            found.append((at, at + len(value)))
    return sorted(found)
