import PushSecurity
import PushWire
import Synchronization

/// What every loop of one store process shares, behind one lock (any thread): the login
/// and token limits, so that a store on N loops does not allow N times the failures
/// ([8-5]), and the FETCH statistics not yet written, so a STATUS counts FETCHes made on
/// any loop. Provider and gateway credentials are accepted once in the whole process
/// ([7.1-5]). A store on one loop has one of its own.
public final class StoreProcessState: Sendable {
    struct Guarded {
        var logins: LoginThrottle
        /// BAD_TOKEN answers per client address: forged tokens are tried in bulk otherwise.
        var badTokens: FailureWindowLimiter
        /// FETCH statistics not yet handed to the writer, by payload sequence ([4.8-3]).
        var fetchTallies: [UInt64: FetchTally] = [:]
        /// Idempotency keys of SENDs being committed on any loop ([4.17-6]).
        var sendsInFlight: Set<IdempotencyKey> = []
        /// Payloads recalled lately on any loop, so that no loop hands over a push for one
        /// that is still waiting in its memory ([4.17-4]); the oldest are forgotten first.
        var recalled = RecentIDs(capacity: 100_000)
        /// Refused tokens not yet counted in the database, where every store of it counts
        /// them (`StoreLogic.sharesTokenLimits`), in windows by the same rule; empty otherwise.
        var tokenFailuresToShare: FailureWindowLimiter
    }

    let state: Mutex<Guarded>

    /// A RECALL was committed: the payload's push, if one still waits, is not handed over.
    func noteRecalled(_ id: PayloadID) {
        state.withLock { $0.recalled.insert(id) }
    }

    /// Whether the payload was recalled lately.
    func wasRecalled(_ id: PayloadID) -> Bool {
        state.withLock { $0.recalled.contains(id) }
    }
    let replays = CredentialReplayGuard()

    public init(settings: StoreSettings) {
        state = Mutex(Guarded(
            logins: LoginThrottle(LoginThrottle.Settings(settings)),
            badTokens: FailureWindowLimiter(limit: settings.badTokensPerAddress, windowMs: settings.badTokenWindowMs),
            tokenFailuresToShare: FailureWindowLimiter(limit: settings.badTokensPerAddress, windowMs: settings.badTokenWindowMs)))
    }
}

/// A set of payload ids that forgets its oldest past `capacity`.
struct RecentIDs {
    private var members: Set<PayloadID> = []
    private var order: [PayloadID] = []
    private var head = 0
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    mutating func insert(_ id: PayloadID) {
        guard members.insert(id).inserted else { return }
        order.append(id)
        if members.count > capacity {
            members.remove(order[head])
            head += 1
            if head * 2 > order.count {
                order.removeFirst(head)
                head = 0
            }
        }
    }

    func contains(_ id: PayloadID) -> Bool { members.contains(id) }
}
