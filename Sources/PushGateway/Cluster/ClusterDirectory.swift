import PushWire

/// Where every device of the cluster is connected, as the nodes' presence messages tell
/// it, and which nodes are alive. Each node keeps its own copy; no I/O. Loop-confined.
///
/// It also indexes the user and tags of every device seen, for targets when the gateway
/// follows no registry: then, as on one node (SPEC 1.1), a target matches the devices
/// that connected to any node since that node started.
final class ClusterDirectory {
    struct Location: Equatable {
        var node: String
        var stamp: UInt64
    }

    struct Device {
        var user: String
        var tags: [String]
        var location: Location?
    }

    struct Node {
        var boot: UInt64
        var lastHeardMs: Int64
    }

    /// What a presence change means for this node.
    enum Effect: Equatable {
        case none
        /// A later connection of a device this node holds exists elsewhere: this node
        /// closes its own with GOAWAY REPLACED.
        case replaceLocal(String)
    }

    let localNode: String
    /// Device ids, users and tags are keys by their exact bytes ([3.3-8]).
    private(set) var devices: [ExactName: Device] = [:]
    private(set) var nodes: [String: Node] = [:]
    /// Members taken for dead and not heard from since: heard again, their presence is
    /// needed, and a member a node heartbeat speaks for does not know it must send it.
    private(set) var forgotten: [String: UInt64] = [:]
    private var byUser: [ExactName: Set<ExactName>] = [:]
    private var byTag: [ExactName: Set<ExactName>] = [:]

    /// On a node of several loops, this loop's place: it keeps only the devices whose home
    /// it is, the only ones it routes to or holds.
    let placement: LoopPlacement?

    init(localNode: String, placement: LoopPlacement? = nil) {
        self.localNode = localNode
        self.placement = placement
    }

    /// The node a device is connected to, if any node that is alive holds it.
    func node(of deviceID: String) -> String? {
        devices[ExactName(deviceID)]?.location?.node
    }

    /// A stamp for a new local connection of `deviceID`: the wall clock, but always after
    /// any connection of it this node knows of, so a skewed clock elsewhere cannot make
    /// the newest connection the one replaced.
    func stampForNewConnection(of deviceID: String, wallMs: UInt64) -> UInt64 {
        max(wallMs, (devices[ExactName(deviceID)]?.location?.stamp ?? 0) + 1)
    }

    // MARK: presence

    /// A device connected to or left `node` (this one included).
    @discardableResult
    func apply(_ change: PresenceChange, from node: String) -> Effect {
        guard placement?.isHome(of: change.deviceID) ?? true else { return .none }
        let deviceID = ExactName(change.deviceID)
        record(deviceID, user: change.user, tags: change.tags)
        guard var device = devices[deviceID] else { return .none }
        if change.online {
            let incoming = Location(node: node, stamp: change.stamp)
            if let current = device.location, !ClusterDirectory.isLater(incoming, than: current) { return .none }
            let previous = device.location
            device.location = incoming
            devices[deviceID] = device
            if let previous, previous.node == localNode, node != localNode { return .replaceLocal(change.deviceID) }
            return .none
        }
        // Leaving: only the connection it names. A device that moved on stays where it is.
        if let current = device.location, current.node == node, current.stamp == change.stamp {
            device.location = nil
            devices[deviceID] = device
        }
        return .none
    }

    /// Connections ordered by stamp, then by node name (so every node orders them alike).
    static func isLater(_ lhs: Location, than rhs: Location) -> Bool {
        lhs.stamp != rhs.stamp ? lhs.stamp > rhs.stamp : lhs.node > rhs.node
    }

    private func record(_ deviceID: ExactName, user: String, tags: [String]) {
        if let known = devices[deviceID] {
            guard !known.user.isExactly(user) || known.tags.count != tags.count || !zip(known.tags, tags).allSatisfy({ $0.isExactly($1) })
            else { return }
            unindex(deviceID, known)
            devices[deviceID] = Device(user: user, tags: tags, location: known.location)
        } else {
            devices[deviceID] = Device(user: user, tags: tags, location: nil)
        }
        byUser[ExactName(user), default: []].insert(deviceID)
        for tag in tags { byTag[ExactName(tag), default: []].insert(deviceID) }
    }

    private func unindex(_ deviceID: ExactName, _ device: Device) {
        let user = ExactName(device.user)
        byUser[user]?.remove(deviceID)
        if byUser[user]?.isEmpty == true { byUser[user] = nil }
        for name in device.tags {
            let tag = ExactName(name)
            byTag[tag]?.remove(deviceID)
            if byTag[tag]?.isEmpty == true { byTag[tag] = nil }
        }
    }

    // MARK: nodes

    /// What a heartbeat means for this node.
    enum Arrival: Equatable {
        /// A node already known, same boot.
        case known
        /// A node not heard from before, or back under a new boot: it needs this node's
        /// presence, and what its earlier boot held is gone.
        case new
        /// A node taken for dead (silent too long), heard again under the same boot: it may
        /// not know it was forgotten.
        case back
    }

    @discardableResult
    func heard(from node: String, boot: UInt64, nowMs: Int64) -> Arrival {
        guard node != localNode else { return .known }
        if let known = nodes[node], known.boot == boot {
            nodes[node]?.lastHeardMs = nowMs
            return .known
        }
        if nodes[node] != nil { forgetDevices(of: node) }
        nodes[node] = Node(boot: boot, lastHeardMs: nowMs)
        return forgotten.removeValue(forKey: node) == boot ? .back : .new
    }

    /// Nodes silent since `deadlineMs` are taken as dead: their devices are offline (they
    /// will reconnect to a live node, which announces them again). Returns their names.
    func removeNodes(silentSince deadlineMs: Int64) -> [String] {
        let dead = nodes.filter { $0.value.lastHeardMs < deadlineMs }
        for (node, known) in dead {
            nodes[node] = nil
            forgotten[node] = known.boot
            forgetDevices(of: node)
        }
        return Array(dead.keys)
    }

    /// Every node counts as heard from now: while this node's own link was down it heard
    /// nobody, and silence it could not have heard is not theirs.
    func heardFromAll(nowMs: Int64) {
        for (node, known) in nodes where known.lastHeardMs < nowMs { nodes[node]?.lastHeardMs = nowMs }
    }

    private func forgetDevices(of node: String) {
        for (deviceID, device) in devices where device.location?.node == node {
            devices[deviceID]?.location = nil
        }
    }

    /// The devices this node holds, as presence changes to announce again.
    func localPresence() -> [PresenceChange] {
        devices.compactMap { deviceID, device in
            guard let location = device.location, location.node == localNode else { return nil }
            return PresenceChange(deviceID: deviceID.text, online: true, stamp: location.stamp, user: device.user, tags: device.tags)
        }
    }

    // MARK: targets

    /// Every device seen with this target (for a gateway without a registry).
    func forEachDevice(matching target: PushTarget, _ body: (String) -> Void) {
        switch target {
        case .device(let id):
            if devices[ExactName(id)] != nil { body(id) }
        case .user(let user):
            for id in byUser[ExactName(user)] ?? [] { body(id.text) }
        case .tag(let tag):
            for id in byTag[ExactName(tag)] ?? [] { body(id.text) }
        }
    }
}
