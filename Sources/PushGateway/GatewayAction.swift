import PushWire

/// What `GatewayLogic` wants done, in the order decided: on the devices' connections, and
/// elsewhere for a push. The logic has already changed its state as if each action
/// succeeds: a connection that fails to take one anyway is reported back afterwards
/// (`GatewayLogic.disconnect`).
public enum GatewayAction {
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
    /// Send the provider's PUSH being handled to `destination` too, for the devices it
    /// holds; its counts join the answer to the provider ([4.13-3]).
    case forward(to: PushDestination)
}

/// Where else a push goes, for devices this logic does not hold. The nodes of a cluster are
/// meant to join as a second case, gathered by the same mechanism.
public enum PushDestination: Hashable, Sendable {
    /// Another loop of this process: the home of the devices it holds (`LoopPlacement`).
    case loop(Int)
}

extension GatewayAction: Equatable {
    /// Links compare by identity, frames by their bytes.
    public static func == (lhs: GatewayAction, rhs: GatewayAction) -> Bool {
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
    public var link: DeviceLink? {
        switch self {
        case .push(let link, _), .missed(let link, _), .replaced(let link), .revoked(let link), .cutOff(let link),
             .stalled(let link): link
        case .forward: nil
        }
    }
}
