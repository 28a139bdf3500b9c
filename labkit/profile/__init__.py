"""Flame graphs that render offline: CPU profiles (py-spy) and allocation profiles (memray), drawn inline.

    from labkit import profile
    cpu, load = profile.under_load(svc, "/customers/1/export", load_rate=30, duration_s=5, svg=True)
    profile.icicle_chart(cpu)              # our chart (Altair): survives a static export
    profile.flamegraph(cpu)                # py-spy's own SVG, interactive, in a frame
    cpu.stacks.top(10)                     # the functions with the most samples
    profile.lines(fn, *args, watch=(conn,))  # per source line: time, allocations, SQL, HTTP (%%lines for a cell)
    mem = profile.memory(handle, request)  # one call under memray
    profile.icicle_chart(mem.by_count); mem.top("bytes"); mem.temporaries(); mem.peak_bytes

One shape for every profile — :class:`Stacks`, weighted call stacks — so one chart and one table serve CPU
samples, allocation counts and bytes alike. What each tool can and cannot see is in :mod:`labkit.profile.cpu`
and :mod:`labkit.profile.allocations`. Nothing here fetches anything from the network.
"""

from labkit.profile.allocations import MemoryProfile, Tracking, memory, tracking
from labkit.profile.cpu import CpuProfile, attach, call, py_spy_path, under_load
from labkit.profile.differential import ProfileDiff, diff, diff_chart, diff_under_load
from labkit.profile.perline import LineProfile, lines, lines_of_cell
from labkit.profile.render import Frame, flamegraph, icicle_chart, memray_html
from labkit.profile.stacks import Stacks, frame_parts

__all__ = ["CpuProfile", "MemoryProfile", "Stacks", "Tracking", "Frame", "attach", "call", "under_load",
           "memory", "tracking", "icicle_chart", "flamegraph", "memray_html", "py_spy_path", "frame_parts",
           "ProfileDiff", "diff", "diff_under_load", "diff_chart", "LineProfile", "lines", "lines_of_cell"]
