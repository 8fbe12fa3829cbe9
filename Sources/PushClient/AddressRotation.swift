import PushEventLoop

/// Which of a link's addresses to try next, and how long to wait first. A failure moves to
/// the next address in order (wrapping); the backoff (exponential, with jitter, so a fleet
/// of clients does not reconnect in step) is paid once per round in which every address
/// failed in a row, not per address: a dead first store costs one failed connect, not a
/// backoff. With one address every failure ends a round, which is the backoff a link with
/// a single address always had. Pure logic, so that tests can step it.
struct AddressRotation {
    /// What to do after a failure.
    struct Step: Equatable {
        var delayMs: Int64
        /// Every address failed since the last connection that reached HELLO_OK (or the start).
        var everyAddressFailed: Bool
    }

    let count: Int
    /// The address to try now.
    private(set) var index = 0
    private var failuresInRound = 0
    private var backoffMs: Int64 = 0
    /// Jitter source; tests fix it.
    var random: (ClosedRange<Int64>) -> Int64 = { Int64.random(in: $0) }

    /// Most the jitter before another address after a dropped connection: the clients of a
    /// store that died all notice at once, and should not all reach the next one in step.
    static let dropJitterMs: Int64 = 100

    init(count: Int) {
        self.count = max(1, count)
    }

    /// The connection at `index` reached HELLO_OK: the next failure starts a new round.
    mutating func connected() {
        backoffMs = 0
        failuresInRound = 0
    }

    /// The owner left the address at `index`, which had not failed, for the next
    /// (`ServerLink.moveOn`): the round of failures, if one starts, starts there.
    mutating func movedOn() {
        index = (index + 1) % count
        failuresInRound = 0
    }

    /// The attempt at `index` failed, or its connection ended. `wasConnected`: the
    /// connection had been made (it dropped, or the server refused HELLO). `shuttingDown`:
    /// the server said GOAWAY SHUTTING_DOWN, so another address is tried at once.
    mutating func failed(wasConnected: Bool, shuttingDown: Bool) -> Step {
        index = (index + 1) % count
        failuresInRound += 1
        guard failuresInRound >= count else {
            let delay = shuttingDown || !wasConnected ? 0 : random(0...AddressRotation.dropJitterMs)
            return Step(delayMs: delay, everyAddressFailed: false)
        }
        failuresInRound = 0
        backoffMs = wasConnected ? 100 : min(max(backoffMs * 2, 100), 5_000)
        return Step(delayMs: backoffMs / 2 + random(0...backoffMs), everyAddressFailed: true)
    }
}

/// One failed attempt of a link: the address it tried and why it failed.
public struct AddressFailure: Equatable, Sendable, CustomStringConvertible {
    public var address: HostPort
    public var error: ClientError

    public init(address: HostPort, error: ClientError) {
        self.address = address
        self.error = error
    }

    public var description: String { "\(address): \(error)" }
}
