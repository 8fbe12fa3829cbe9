import PushWire

/// What `GatewayLogic` wants done, in the order decided: on the devices' connections, and
/// elsewhere for a push. The logic has already changed its state as if each action
/// succeeds: a connection that fails to take one anyway is reported back afterwards
/// (`GatewayLogic.disconnect`).
enum GatewayAction {
    /// Write an encoded PUSH. A fan-out hands every device the same array, encoded once.
    case push(DeviceLink, frame: [UInt8])
    /// MISSED ([4.15-1]), before the pushes that follow it.
    case missed(DeviceLink, Missed)
    /// GOAWAY REPLACED, then close ([5.5-3]).
    case replaced(DeviceLink)
    /// GOAWAY REVOKED, then close: the registration the connection was admitted with was
    /// revoked, or replaced by a newer enrolment of its device id.
    case revoked(DeviceLink)
    /// Close as a slow consumer: a frame that may not wait would pass the output cap. The
    /// logic has already let the device go, as for any closed connection.
    case cutOff(DeviceLink)
    /// Close as a slow consumer that has stopped reading: frames the gateway started waited
    /// in its output with its side taking none of it for the stall limit ([5.5-7]). The
    /// logic has already let the device go.
    case stalled(DeviceLink)
    /// Send the push being routed to `destination` too, for the devices it holds; its
    /// counts join the answer to the provider ([4.13-3]), through the one tally of the
    /// push (`PushTally`), whatever the destination.
    case forward(to: PushDestination)
}

/// Where else a push goes, for devices this loop does not deliver to itself. The logic
/// decides each one (`GatewayLogic.route`); the server, `LoopForwarding` and
/// `GatewayCluster` only carry them out.
enum PushDestination: Equatable {
    /// Another loop of this process: the home of the devices it holds (`LoopPlacement`).
    /// It gets the provider's `Push` itself.
    case loop(Int)
    /// Another node of the cluster, for these devices, connected there as far as the
    /// directory knows; what it cannot reach comes back as its counts, or goes to the
    /// devices' queues when it does not answer (`GatewayLogic.forwardFailed`).
    indirect case node(String, ClusterPush, devices: [QueueTarget])
    /// The queue in JetStream of a device connected to no node ([4.13-4] across the cluster),
    /// or no longer where the push was sent.
    indirect case queue(ClusterPush, QueueTarget)
    /// Nowhere: this many devices only the cluster could reach, while this node cannot reach
    /// NATS. They count as not reached, and the PUSH is answered BUSY for its sender to retry
    /// rather than left uncounted ([4.13-13]).
    case unreachable(devices: UInt32)
}

/// A device whose share of a push leaves this node, and whose pushes its queue holds.
struct QueueTarget: Equatable {
    var deviceID: String
    var owner: QueueOwner
}

extension GatewayAction: Equatable {
    /// Links compare by identity, frames by their bytes.
    static func == (lhs: GatewayAction, rhs: GatewayAction) -> Bool {
        switch (lhs, rhs) {
        case let (.push(a, x), .push(b, y)): a === b && x == y
        case let (.missed(a, x), .missed(b, y)): a === b && x == y
        case let (.replaced(a), .replaced(b)), let (.revoked(a), .revoked(b)), let (.cutOff(a), .cutOff(b)),
             let (.stalled(a), .stalled(b)): a === b
        case let (.forward(a), .forward(b)): a == b
        default: false
        }
    }
}

extension GatewayAction {
    /// The device connection the action is for, if it is for one.
    var link: DeviceLink? {
        switch self {
        case .push(let link, _), .missed(let link, _), .replaced(let link), .revoked(let link), .cutOff(let link),
             .stalled(let link): link
        case .forward: nil
        }
    }
}
