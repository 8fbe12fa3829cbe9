/// One heartbeat per node (protocol/CLUSTER.md, "One heartbeat per node"): the member that
/// speaks for a node of several loops (loop 0, named as the node) tells for all of them,
/// so heartbeats grow with nodes, not members. Its members share one process and one boot:
/// they are alive while it is.
extension ClusterDirectory {
    /// What a heartbeat means for this member.
    struct HeartbeatEffect: Equatable {
        /// Members heard anew (first, under a new boot, or back after being taken for dead).
        var arrived: [String] = []
        /// This member announces the devices it holds: a member heard anew lacks them, or
        /// the sender asked for everyone's presence.
        var announce = false
        /// This member asks every node for its presence: a member the heartbeat speaks for,
        /// or its sender, lost its devices here and would not announce them again unasked.
        var askForPresence = false
    }

    /// The members a heartbeat speaks for, or nil if it names more loops than a node can
    /// run. A heartbeat of a node's first member that names its loops speaks for NODE and
    /// NODE~1 to NODE~(loops-1); any other (another member's, or a previous build's,
    /// without `loops`) for its sender alone.
    static func members(speakingFor heartbeat: NodeHeartbeat) -> [String]? {
        guard heartbeat.loops <= GatewayConfiguration.maxLoops else { return nil }
        guard heartbeat.loops > 1, ClusterConfiguration.node(ofMember: heartbeat.node) == heartbeat.node else {
            return [heartbeat.node]
        }
        return [heartbeat.node] + (1..<heartbeat.loops).map { "\(heartbeat.node)\(ClusterConfiguration.memberSeparator)\($0)" }
    }

    /// A heartbeat from another node, its seal checked (`heartbeat.node` is the sender).
    /// Nil if it names more loops than a node can run: it is refused whole.
    func heard(_ heartbeat: NodeHeartbeat, nowMs: Int64) -> HeartbeatEffect? {
        guard let members = ClusterDirectory.members(speakingFor: heartbeat) else { return nil }
        var effect = HeartbeatEffect(announce: heartbeat.wantsPresence)
        for member in members {
            let arrival = heard(from: member, boot: heartbeat.boot, nowMs: nowMs)
            guard arrival != .known else { continue }
            effect.arrived.append(member)
            effect.announce = true
            if member == heartbeat.node {
                // Back after being taken for dead (a pause, a cut it did not notice), it does
                // not know it was forgotten and will not tell its devices again unless asked;
                // one that wants presence just (re)connected and tells them itself.
                if heartbeat.devices > 0, !heartbeat.wantsPresence { effect.askForPresence = true }
            } else if arrival == .back {
                // Its own link was up all along: it will not announce again unasked.
                effect.askForPresence = true
            }
        }
        return effect
    }
}
