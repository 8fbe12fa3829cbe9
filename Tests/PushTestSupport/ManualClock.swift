import PushClock
import PushEventLoop
import PushSession
import Synchronization

/// The real clocks plus an offset a test moves forward, so lifetimes and TTLs run out at
/// once instead of after a sleep. Credentials made with the real clock stay valid as long
/// as the offset stays within their skew window.
public final class ManualClock: Sendable {
    private let offsetMs = Atomic<Int64>(0)

    public init() {}

    public func advance(byMs milliseconds: Int64) {
        offsetMs.add(milliseconds, ordering: .sequentiallyConsistent)
    }

    public var wallMilliseconds: @Sendable () -> UInt64 {
        { [self] in Clocks.wallMilliseconds() &+ UInt64(offsetMs.load(ordering: .sequentiallyConsistent)) }
    }

    public var monotonicMilliseconds: @Sendable () -> Int64 {
        { [self] in Clocks.monotonicMilliseconds() + offsetMs.load(ordering: .sequentiallyConsistent) }
    }
}
