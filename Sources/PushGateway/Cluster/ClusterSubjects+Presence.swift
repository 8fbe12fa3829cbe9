/// Presence by bucket (protocol/CLUSTER.md, "Presence by bucket"): a device's connect or
/// leave goes to the members that can be its home, not to every member of every node.
extension ClusterSubjects {
    /// Fixed for the cluster: every node, whatever its loop count, buckets alike.
    static let presenceBuckets = 64

    /// FNV-1a of the id modulo the bucket count: the hash `LoopPlacement` takes modulo the
    /// loop count, so for a loop count dividing the bucket count (or divided by it) the
    /// bucket tells the home loop.
    static func presenceBucket(of deviceID: String) -> Int {
        LoopPlacement.home(of: deviceID, count: presenceBuckets)
    }

    /// What a member at `placement` subscribes to, to hear every change of a device whose
    /// home it is: the buckets whose devices it can hold when its node's loop count divides
    /// the bucket count or is a multiple of it, else every bucket; and the unbucketed subject
    /// of the previous build.
    func presenceSubjects(for placement: LoopPlacement?) -> [String] {
        let buckets = ClusterSubjects.presenceBuckets
        guard let placement, placement.count > 1 else { return [presenceWildcard, presence] }
        if buckets % placement.count == 0 {
            return stride(from: placement.index, to: buckets, by: placement.count).map(presence(bucket:)) + [presence]
        }
        if placement.count % buckets == 0 { return [presence(bucket: placement.index % buckets), presence] }
        return [presenceWildcard, presence]
    }
}
