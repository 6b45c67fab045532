// The sums that decide the DPC rotation (`src/products/dpc_rotation.rs`, issue #33): over
// the cells of four neighbouring scan positions of a DPC field (g_r, g_c) before flip and
// rotation (as `idpc_pack` writes it with θ = 0 and no flip), the divergence D and curl C
// of the field as it is and with its components swapped, and per workgroup the partial
// sums ΣC², ΣC·D, ΣD² of each, in float32; the host adds the partials in float64.

struct CurlParams {
    rows: u32,
    cols: u32,
    groups_x: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> cp: CurlParams;
@group(0) @binding(1) var<storage, read> field: array<vec2<f32>>;
// Per workgroup: six sums (no flip: ΣC², ΣCD, ΣD²; flip: the same).
@group(0) @binding(2) var<storage, read_write> partials: array<f32>;

const WG: u32 = 256u;
var<workgroup> share: array<array<f32, 6>, 256>;

@compute @workgroup_size(256)
fn dpc_curl(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let group = wg.x + wg.y * cp.groups_x;
    let cell = group * WG + lid;
    let cells_c = max(cp.cols, 1u) - 1u;
    let cells = (max(cp.rows, 1u) - 1u) * cells_c;
    var s = array<f32, 6>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    if (cell < cells) {
        let r = cell / cells_c;
        let c = cell % cells_c;
        let k = r * cp.cols + c;
        let a = field[k];
        let b = field[k + 1u];
        let d = field[k + cp.cols];
        let e = field[k + cp.cols + 1u];
        // ∂/∂row and ∂/∂col of both components on the cell.
        let d_row = (d + e - a - b) * 0.5;
        let d_col = (b + e - a - d) * 0.5;
        let div = d_row.x + d_col.y;
        let curl = d_row.y - d_col.x;
        // Swapped components: (g_c, g_r).
        let div_f = d_row.y + d_col.x;
        let curl_f = d_row.x - d_col.y;
        s = array<f32, 6>(curl * curl, curl * div, div * div, curl_f * curl_f, curl_f * div_f, div_f * div_f);
    }
    share[lid] = s;
    for (var half = WG / 2u; half > 0u; half /= 2u) {
        workgroupBarrier();
        if (lid < half) {
            for (var q = 0u; q < 6u; q += 1u) {
                share[lid][q] += share[lid + half][q];
            }
        }
    }
    if (lid < 6u) {
        partials[6u * group + lid] = share[0][lid];
    }
}
