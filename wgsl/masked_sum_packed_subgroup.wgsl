// stem4d:subgroups masked_sum_packed.wgsl masked_sum_subgroup.wgsl
// The masked sum over a compressed resident for adapters with subgroups: the sectors are
// fetched and decoded as `masked_sum_packed` does (`sum_packed_lanes`), and the slots' lanes
// meet as `masked_sum_subgroup`'s do (`meet_subgroup`), so the workgroup's memory holds
// only the decode windows. The engine appends `masked_sum_subgroup.wgsl` and this entry
// point to `masked_sum_packed.wgsl` (and its preludes). 8- and 16-bit samples only; the
// host sizes the parts for a subgroup's sums as for the raw resident's.

@compute @workgroup_size(32)
fn masked_sum_packed_subgroup(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) sid: u32,
    @builtin(subgroup_size) sn: u32,
) {
    let bits = params.bits;
    let tile_len = 256u / bits;
    let pt = part_of(wg);
    // The whole workgroup shares the tile: a uniform exit.
    if (pt.tile * tile_len >= params.frames) {
        return;
    }
    meet_subgroup(pt, sid, sn, bits, sum_packed_lanes(pt, lid, bits));
}
