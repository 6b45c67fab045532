// Draw a plane on a canvas: aspect-preserving fit, zoom and pan, nearest sampling, limits
// from the stats buffer (never read back, in shown units: the plane's values go through the
// same display scale), a 256-level colour map or, for direction images, a colour wheel (hue
// from the `hue` plane's angle, brightness from the plane's level), and the overlays the
// user drags (detector disk/annulus/rectangle/point, cursor, scan ROI) in source pixel units.

struct View {
    src_w: u32,
    src_h: u32,
    canvas_w: u32,
    canvas_h: u32,
    cmap: u32,
    scale: u32,
    overlay: u32,
    cursor_on: u32,
    zoom: f32,
    pan_r: f32,
    pan_c: f32,
    line_px: f32,
    o_r: f32,
    o_c: f32,
    o_inner: f32,
    o_outer: f32,
    rect_r0: f32,
    rect_r1: f32,
    rect_c0: f32,
    rect_c1: f32,
    cursor_r: f32,
    cursor_c: f32,
    // Non-zero: colour wheel (hue from `hue`, radians) instead of the colour map.
    wheel: u32,
    _pad1: f32,
}

@group(0) @binding(0) var<uniform> view: View;
@group(0) @binding(1) var<storage, read> plane: array<f32>;
@group(0) @binding(2) var<storage, read> stats: array<u32>;
@group(0) @binding(3) var<storage, read> lut: array<u32>;
// Direction (radians) per pixel for the wheel; the plane itself where there is none.
@group(0) @binding(4) var<storage, read> hue: array<f32>;

const OVERLAY_NONE: u32 = 0u;
const OVERLAY_DISK: u32 = 1u;
const OVERLAY_ANNULUS: u32 = 2u;
const OVERLAY_RECT: u32 = 3u;
const OVERLAY_POINT: u32 = 4u;

@vertex
fn vs_main(@builtin(vertex_index) k: u32) -> @builtin(position) vec4<f32> {
    let x = f32((k << 1u) & 2u) * 2.0 - 1.0;
    let y = f32(k & 2u) * 2.0 - 1.0;
    return vec4<f32>(x, y, 0.0, 1.0);
}

fn unpack(w: u32) -> vec4<f32> {
    return vec4<f32>(f32(w & 0xffu), f32((w >> 8u) & 0xffu), f32((w >> 16u) & 0xffu), 255.0) / 255.0;
}

// HSV at full saturation: hue 0 (red) at angle 0, turning with the angle (one turn per
// 2π), brightness `value` (`src/display/wheel.rs`, operation for operation; C-DPC-POLAR).
fn wheel_rgb(angle: f32, value: f32) -> vec3<f32> {
    let turn = angle * 0.15915494;
    let h6 = (turn - floor(turn)) * 6.0;
    var k = vec3<f32>(5.0, 3.0, 1.0) + h6;
    k = select(k, k - 6.0, k >= vec3<f32>(6.0));
    return value - value * clamp(min(k, 4.0 - k), vec3<f32>(0.0), vec3<f32>(1.0));
}

// Distance (source px) from pixel-centre coordinates `p` to the overlay outline.
fn overlay_distance(p: vec2<f32>) -> f32 {
    let centre = vec2<f32>(view.o_r, view.o_c);
    switch view.overlay {
        case 1u: {
            return abs(length(p - centre) - view.o_outer);
        }
        case 2u: {
            let d = length(p - centre);
            return min(abs(d - view.o_inner), abs(d - view.o_outer));
        }
        case 3u: {
            // Half-open [r0, r1) × [c0, c1): the outline runs along the pixel edges.
            let q = p + vec2<f32>(0.5, 0.5);
            let lo = vec2<f32>(view.rect_r0, view.rect_c0);
            let hi = vec2<f32>(view.rect_r1, view.rect_c1);
            let outside = length(max(max(lo - q, q - hi), vec2<f32>(0.0, 0.0)));
            let inside = min(min(q.x - lo.x, hi.x - q.x), min(q.y - lo.y, hi.y - q.y));
            return select(abs(inside), outside, outside > 0.0);
        }
        case 4u: {
            let d = abs(p - centre);
            return select(1.0e9, min(d.x, d.y), max(d.x, d.y) < 2.5);
        }
        default: {
            return 1.0e9;
        }
    }
}

@fragment
fn fs_main(@builtin(position) frag: vec4<f32>) -> @location(0) vec4<f32> {
    let cw = f32(view.canvas_w);
    let ch = f32(view.canvas_h);
    let fit = min(cw / f32(view.src_w), ch / f32(view.src_h)) * view.zoom;
    // Source coordinates: row along y, column along x; pan is the view centre.
    let s = vec2<f32>((frag.y - ch * 0.5) / fit + view.pan_r, (frag.x - cw * 0.5) / fit + view.pan_c);
    if (s.x < 0.0 || s.y < 0.0 || s.x >= f32(view.src_h) || s.y >= f32(view.src_w)) {
        return vec4<f32>(0.12, 0.12, 0.13, 1.0);
    }
    let row = min(u32(s.x), view.src_h - 1u);
    let col = min(u32(s.y), view.src_w - 1u);
    let k = row * view.src_w + col;
    let raw = plane[k];
    let lo = bitcast<f32>(stats[0]);
    let hi = bitcast<f32>(stats[1]);
    var colour = vec4<f32>(0.5, 0.5, 0.5, 1.0);
    if (is_finite_f32(raw)) {
        let t = clamp((shown(raw, view.scale) - lo) / (hi - lo), 0.0, 1.0);
        let level = u32(t * 255.0 + 0.5);
        if (view.wheel == 0u) {
            colour = unpack(lut[view.cmap * 256u + level]);
        } else if (is_finite_f32(hue[k])) {
            colour = vec4<f32>(wheel_rgb(hue[k], f32(level) / 255.0), 1.0);
        }
    }
    // Pixel (i, j) covers [i, i+1) × [j, j+1): masks measure from its centre.
    let p = s - vec2<f32>(0.5, 0.5);
    let half_line = view.line_px / fit;
    if (overlay_distance(p) < half_line) {
        colour = vec4<f32>(0.0, 1.0, 0.6, 1.0);
    }
    if (view.cursor_on != 0u) {
        let d = abs(s - vec2<f32>(view.cursor_r + 0.5, view.cursor_c + 0.5));
        let in_box = max(d.x, d.y) <= 0.5 + half_line && max(d.x, d.y) >= 0.5 - half_line;
        let on_cross = min(d.x, d.y) < half_line && max(d.x, d.y) > 1.5;
        if (in_box || on_cross) {
            colour = vec4<f32>(0.1, 0.9, 1.0, 1.0);
        }
    }
    return colour;
}
