// stem4d:subgroups packed_columns.wgsl
// The CoM moments over a compressed resident (`packed_moments.wgsl`) for adapters with
// subgroups: the invocations of a quad share a sector's positions (u16 and u32) or half
// of them (u8), so each finds one of the four pixels in flight (its group's index words,
// the widths before it, its bad-pixel bit) and passes it to the other three, instead of
// all four finding all four (decision 0060).

// Pixels k, k + cols, k + 2 · cols and k + 3 · cols: quad lane `lane` finds pixel
// k + lane · cols; a `lane` of 4 (a quad that is not one sector's) finds each itself.
fn four_words(w: Work, k: u32, cols: u32, lane: u32) -> Four {
    if (lane < 4u) {
        let mine = sector_at(w, k + lane * cols);
        return Four(
            words_of(w, quadBroadcast(mine, 0u)),
            words_of(w, quadBroadcast(mine, 1u)),
            words_of(w, quadBroadcast(mine, 2u)),
            words_of(w, quadBroadcast(mine, 3u)),
        );
    }
    return four_found(w, k, cols);
}

@compute @workgroup_size(256)
fn com_moments_packed_quad(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) sid: u32,
) {
    let flat = wg.x + wg.y * params.groups_x;
    if (past_end(flat)) {
        return;
    }
    // A quad shares the work only where its four invocations take the same sector
    // (`work_of` gives four consecutive invocations one slot); the local index's order in
    // the subgroup is not promised, so the subgroup checks it.
    let own = quadBroadcast(lid / 4u, 0u) == lid / 4u;
    packed_moments(work_of(flat, lid), lid, select(4u, sid % 4u, subgroupAll(own)));
}
