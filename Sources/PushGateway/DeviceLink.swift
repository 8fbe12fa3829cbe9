import PushClock
import PushSecurity
import PushSession
import PushWire

/// What the gateway's logic may know of a connected device's connection: whether it takes
/// writes and how much more its output holds. The logic reads it and writes nothing: what
/// goes to the device leaves as `GatewayAction`s, which the driver carries out.
public protocol DeviceLink: AnyObject {
    /// Bytes the link's output takes before passing its cap; nil when it takes no writes
    /// (closed, closing, handed off).
    var outputRoom: Int? { get }
    /// How far the device's side has taken the link's output; nil when it is not known
    /// (closed, or not TCP). Costs system calls: read only by the stall check ([5.5-7]).
    var outputProgress: LinkOutput? { get }
}

/// What a link's output holds that the device's side has not taken, and a running count of
/// the bytes it has taken, which moves whenever it takes any.
public struct LinkOutput: Equatable, Sendable {
    public var notTaken: Int
    public var taken: UInt64

    public init(notTaken: Int, taken: UInt64) {
        self.notTaken = notTaken
        self.taken = taken
    }
}
