#!/usr/bin/env python3
"""Write src/display/colormaps.rs: 256-entry sRGB tables of the viewer's colour maps,
sampled from matplotlib (the maps microscopists compare against). Regenerate with
    pip install matplotlib && python3 scripts/make_colormaps.py
The output is committed so builds never need matplotlib."""
import pathlib

import matplotlib
import numpy as np

MAPS = ["inferno", "viridis", "magma", "gray", "RdBu_r", "twilight"]
out = pathlib.Path(__file__).resolve().parent.parent / "src" / "display" / "colormaps.rs"
lines = [
    "//! Colour maps sampled at 256 levels from matplotlib "
    f"{matplotlib.__version__} by `scripts/make_colormaps.py` (generated; do not edit).",
    "",
    f"pub const NAMES: [&str; {len(MAPS)}] = [{', '.join(repr(m).replace(chr(39), chr(34)) for m in MAPS)}];",
    "",
    f"pub const TABLES: [[[u8; 3]; 256]; {len(MAPS)}] = [",
]
for name in MAPS:
    rgba = matplotlib.colormaps[name](np.linspace(0.0, 1.0, 256))
    rgb = np.clip(np.round(rgba[:, :3] * 255.0), 0, 255).astype(int)
    lines.append(f"    // {name}")
    lines.append("    [")
    for row in range(0, 256, 8):
        lines.append("        " + " ".join(f"[{r}, {g}, {b}]," for r, g, b in rgb[row:row + 8]))
    lines.append("    ],")
lines.append("];")
out.write_text("\n".join(lines) + "\n")
print(f"wrote {out}")
