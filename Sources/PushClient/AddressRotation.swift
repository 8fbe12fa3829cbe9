import PushEventLoop

/// Which of a link's addresses to try next, and how long to wait first. A failure moves to
/// the next address in order (wrapping); the backoff (`Backoff`: exponential, with jitter,
/// so a fleet of clients does not reconnect in step) is paid once per round in which every
/// address failed in a row, not per address: a dead first store costs one failed connect,
/// not a backoff. With one address every failure ends a round, which is the backoff a link
/// with a single address always had.
///
/// The backoff goes back to its first value only after a connection that reached HELLO_OK
/// and stayed open (`stayedOpen`, [5.8-3]): a server that accepts TCP and then refuses HELLO
/// (ERROR BUSY) or closes is a failed attempt like a refused connect, so it is retried
/// ever more slowly, not every 100 ms. Pure logic, so that tests can step it.
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
    private var backoff = Backoff(baseMs: AddressRotation.baseMs, capMs: AddressRotation.capMs)
    /// Jitter source; tests fix it.
    var random: (ClosedRange<Int64>) -> Int64 = { Int64.random(in: $0) } {
        didSet { backoff.random = random }
    }

    /// The first wait's nominal value, and the most it grows to ([5.8-1]: base at least 50 ms,
    /// cap between 5 and 60 s; with the jitter a wait is at most 1.25 times the cap).
    static let baseMs: Int64 = 100
    static let capMs: Int64 = 5_000

    /// Most the jitter before another address after a dropped connection: the clients of a
    /// store that died all notice at once, and should not all reach the next one in step.
    static let dropJitterMs: Int64 = 100

    init(count: Int) {
        self.count = max(1, count)
    }

    /// The connection at `index` reached HELLO_OK: the next failure starts a new round of
    /// addresses. The backoff stays where it is until that connection proves it stayed open
    /// (`failed(..., stayedOpen: true)`).
    mutating func connected() {
        failuresInRound = 0
    }

    /// The owner left the address at `index`, which had not failed, for the next
    /// (`ServerLink.moveOn`): the round of failures, if one starts, starts there.
    /// `stayedOpen` as for `failed`.
    mutating func movedOn(stayedOpen: Bool = false) {
        if stayedOpen { backoff.reset() }
        index = (index + 1) % count
        failuresInRound = 0
    }

    /// The attempt at `index` failed, or its connection ended. `wasConnected`: the TCP
    /// connection had been made (it dropped, or the server refused HELLO). `shuttingDown`:
    /// the server said GOAWAY SHUTTING_DOWN, so another address is tried at once.
    /// `stayedOpen`: the connection reached HELLO_OK and was up long enough to count as a
    /// success, which ends the run of failures before this one ([5.8-3]); anything less
    /// (a refusal, a close, a GOAWAY before or soon after HELLO_OK) is one more failure.
    mutating func failed(wasConnected: Bool, shuttingDown: Bool, stayedOpen: Bool = false) -> Step {
        if stayedOpen { backoff.reset() }
        index = (index + 1) % count
        failuresInRound += 1
        guard failuresInRound >= count else {
            let delay = shuttingDown || !wasConnected ? 0 : random(0...AddressRotation.dropJitterMs)
            return Step(delayMs: delay, everyAddressFailed: false)
        }
        failuresInRound = 0
        return Step(delayMs: backoff.next(), everyAddressFailed: true)
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
