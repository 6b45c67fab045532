// Turn a product that lives on the GPU (exact 64-bit sums, CoM moments, a resident frame,
// a reduced pattern) into the f32 plane the display samples, without leaving the GPU.
// The exact values stay where they are; this plane is for pixels on screen only (C-DISPLAY).

struct PrepParams {
    n: u32,
    source: u32,
    stride: u32,
    offset: u32,
    bits: u32,
    groups_x: u32,
    flip: u32,
    // Applied last (1/count turns a sum pattern into the mean pattern).
    scale: f32,
    mean_r: f32,
    mean_c: f32,
    cos_t: f32,
    sin_t: f32,
}

@group(0) @binding(0) var<uniform> pp: PrepParams;
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
@group(0) @binding(3) var<storage, read_write> plane: array<f32>;

const SRC_U64: u32 = 0u;       // a[stride·i + offset] as u64 (lo, hi)
const SRC_U64_DIFF: u32 = 1u;  // b − a, both u64 with the same stride (DF = total − BF)
const SRC_U32: u32 = 2u;       // a[stride·i + offset]
const SRC_FRAME: u32 = 3u;     // pixel i at position `stride` of the resident tile at word `offset`
const SRC_COM_ROW: u32 = 4u;   // moments (t, Σi·I, Σj·I) as three u64 per position
const SRC_COM_COL: u32 = 5u;
const SRC_DPC_ROW: u32 = 6u;
const SRC_DPC_COL: u32 = 7u;
const SRC_F32: u32 = 8u;       // a[stride·i + offset] as f32 bits (complex: stride 2)
// C-DPC-POLAR: the magnitude and direction of DPC vectors.
const SRC_DPC_MAGNITUDE: u32 = 9u;  // |g| of DPC vectors g = (g_r, g_c), f32 pairs in a
const SRC_DPC_ANGLE: u32 = 10u;     // their direction atan2(g_c, g_r), radians

fn com_of(i: u32) -> vec2<f32> {
    let o = 6u * i;
    return com_from_words(array<u32, 6>(a[o], a[o + 1u], a[o + 2u], a[o + 3u], a[o + 4u], a[o + 5u]));
}

fn pair_of(i: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(a[2u * i]), bitcast<f32>(a[2u * i + 1u]));
}

fn dpc_of(i: u32) -> vec2<f32> {
    return dpc_from_com(com_of(i), vec2<f32>(pp.mean_r, pp.mean_c), pp.cos_t, pp.sin_t, pp.flip);
}

@compute @workgroup_size(256)
fn display_prep(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * pp.groups_x * 256u;
    if (i >= pp.n) {
        return;
    }
    var v = 0.0;
    switch pp.source {
        case 0u: {
            let k = pp.stride * i + pp.offset;
            v = u64_f32(a[k], a[k + 1u]);
        }
        case 1u: {
            let k = pp.stride * i + pp.offset;
            let lo = b[k] - a[k];
            let borrow = select(0u, 1u, b[k] < a[k]);
            v = u64_f32(lo, b[k + 1u] - a[k + 1u] - borrow);
        }
        case 2u: {
            v = f32(a[pp.stride * i + pp.offset]);
        }
        case 3u: {
            let per_word = 32u / pp.bits;
            v = f32(sample_at(a[pp.offset + 8u * i + pp.stride / per_word], pp.stride, pp.bits));
        }
        case 4u: {
            v = com_of(i).x;
        }
        case 5u: {
            v = com_of(i).y;
        }
        case 6u: {
            v = dpc_of(i).x;
        }
        case 7u: {
            v = dpc_of(i).y;
        }
        case 9u: {
            let g = pair_of(i);
            v = sqrt(g.x * g.x + g.y * g.y);
        }
        case 10u: {
            v = dpc_angle(pair_of(i));
        }
        default: {
            v = bitcast<f32>(a[pp.stride * i + pp.offset]);
        }
    }
    plane[i] = v * pp.scale;
}
