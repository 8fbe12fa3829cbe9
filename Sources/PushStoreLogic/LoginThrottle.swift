#if canImport(Glibc)
import Glibc
#endif

/// The LOGIN limits of [8-5]: slow a password guesser down without locking the real
/// user out.
///
/// - Per (user, address): the first `freeFailures` attempts are checked at once; after
///   that each attempt waits `backoffMs`, doubling with every failure up to `maxBackoffMs`.
///   A success clears the pair. Only the guessing address waits: the same user from any
///   other address is unaffected.
/// - Per address: a budget of `failuresPerAddress` failures, one given back every
///   `refillMs`, so spraying many user names from one address is slowed too. Only
///   failures spend it, so the users behind a shared address (NAT, a proxy) spend
///   nothing; and a user who logged in from that address before (within `trustedForMs`)
///   is not held to its budget at all, only to its own pair's backoff.
/// - No limit per user alone: a correct password from an address that has not been
///   failing is always checked.
///
/// Attempts count when their result is known. LOGINs sent together are all checked (the
/// many devices of one user behind one address log in at once), so a burst of guesses
/// can overshoot the limits; it then owes for every failure: the pair's wait grows with
/// each one and the address's budget goes into debt, to be repaid at the refill rate. The
/// slow password hash bounds how many guesses a burst can get checked. An attempt whose
/// connection closes before its answer taught the client nothing and counts for nothing.
/// IPv6 addresses count by their /64, which one host can hold whole.
package struct LoginThrottle {
    package struct Settings: Sendable, Equatable {
        var freeFailures: Int
        var backoffMs: UInt64
        var maxBackoffMs: UInt64
        var failuresPerAddress: Int
        var refillMs: UInt64
        var trustedForMs: UInt64

        init(freeFailures: Int, backoffMs: UInt64, maxBackoffMs: UInt64, failuresPerAddress: Int, refillMs: UInt64,
             trustedForMs: UInt64) {
            self.freeFailures = freeFailures
            self.backoffMs = backoffMs
            self.maxBackoffMs = maxBackoffMs
            self.failuresPerAddress = failuresPerAddress
            self.refillMs = refillMs
            self.trustedForMs = trustedForMs
        }

        /// An address's whole budget, in ms of refill.
        var fullCreditMs: Int64 { Int64(max(0, failuresPerAddress)) * Int64(clamping: refillMs) }
        /// What one failure takes from its address's budget.
        var failureCostMs: Int64 { Int64(clamping: refillMs) }

        /// The store's `login_*` settings.
        package init(_ settings: StoreSettings) {
            self.init(freeFailures: settings.loginFreeFailures, backoffMs: settings.loginBackoffMs,
                      maxBackoffMs: settings.loginMaxBackoffMs, failuresPerAddress: settings.loginFailuresPerAddress,
                      refillMs: settings.loginFailureRefillMs, trustedForMs: settings.loginTrustedForMs)
        }
    }

    enum Decision: Equatable {
        case check
        case refuse(retryAfterMs: UInt64)
    }

    private struct PairKey: Hashable {
        var user: String
        var address: String
    }

    private struct Pair {
        /// Failures since the last success.
        var failures = 0
        var blockedUntilMs: UInt64 = 0
        var lastAttemptMs: UInt64 = 0
    }

    private struct Budget {
        /// Milliseconds of refill banked: one failure costs `refillMs`; below 0 after a burst.
        var creditMs: Int64
        var updatedMs: UInt64
    }

    /// Entries kept at most per table; past that the table is pruned, then emptied.
    static let capacity = 200_000
    /// A pair with no attempt for this long starts afresh.
    static let pairMemoryMs: UInt64 = 3_600_000

    let settings: Settings
    private var pairs: [PairKey: Pair] = [:]
    private var budgets: [String: Budget] = [:]
    private var trusted: [PairKey: UInt64] = [:]

    init(_ settings: Settings) {
        self.settings = settings
    }

    private var fullCreditMs: Int64 { settings.fullCreditMs }
    private var failureCostMs: Int64 { settings.failureCostMs }

    /// Whether a LOGIN for `user` from `address` may be checked now. `shared` is the
    /// pair's and the address's state as the database holds it for every store; it
    /// replaces what this store remembers of them.
    mutating func begin(user: String, address: String, nowMs: UInt64, shared: LoginLimitState? = nil) -> Decision {
        let key = PairKey(user: user, address: LoginThrottle.addressKey(address))
        if let shared { load(shared, for: key) }
        if let pair = pairs[key], !LoginThrottle.steppedBack(from: pair.lastAttemptMs, to: nowMs), pair.blockedUntilMs > nowMs {
            return .refuse(retryAfterMs: pair.blockedUntilMs - nowMs)
        }
        guard !isTrusted(key, nowMs: nowMs) else { return .check }
        let credit = state(key).creditMs(atMs: nowMs, settings)
        guard credit >= failureCostMs else { return .refuse(retryAfterMs: UInt64(failureCostMs - credit)) }
        return .check
    }

    /// The outcome of an attempt `begin` allowed, counted by the rule
    /// (`LoginLimitState.after`): what this throttle held for the pair and its address, and
    /// what it holds now. A database that keeps the limits for every store is given the
    /// same change to write (`WriteOperation.loginAttempt`).
    @discardableResult
    mutating func finish(user: String, address: String, succeeded: Bool, nowMs: UInt64) -> LoginLimitChange {
        let key = PairKey(user: user, address: LoginThrottle.addressKey(address))
        let attempt = LoginAttempt(key: LoginLimitKey(user: key.user, address: key.address), succeeded: succeeded, nowMs: nowMs)
        let before = state(key)
        let after = before.after(attempt, settings)
        if after.failures > 0 || after.blockedUntilMs > 0 {
            store(Pair(failures: after.failures, blockedUntilMs: after.blockedUntilMs, lastAttemptMs: after.lastAttemptMs), for: key)
        } else {
            pairs[key] = nil
        }
        if let credit = after.creditMs, after.creditMs != before.creditMs || after.creditUpdatedMs != before.creditUpdatedMs {
            store(Budget(creditMs: credit, updatedMs: after.creditUpdatedMs), for: key.address)
        }
        if after.trustedUntilMs != before.trustedUntilMs {
            if trusted.count >= LoginThrottle.capacity { prune(nowMs: nowMs) }
            if trusted.count < LoginThrottle.capacity { trusted[key] = after.trustedUntilMs }
        }
        return LoginLimitChange(attempt: attempt, before: before, after: after)
    }

    /// What this throttle holds for `user` at `address`, as a database holds it for every
    /// store; a pair with no failures and no wait is no pair, whenever its last attempt was.
    func state(user: String, address: String) -> LoginLimitState {
        state(PairKey(user: user, address: LoginThrottle.addressKey(address)))
    }

    private func state(_ key: PairKey) -> LoginLimitState {
        let pair = pairs[key] ?? Pair()
        let budget = budgets[key.address]
        return LoginLimitState(failures: pair.failures, blockedUntilMs: pair.blockedUntilMs, lastAttemptMs: pair.lastAttemptMs,
                               creditMs: budget?.creditMs, creditUpdatedMs: budget?.updatedMs ?? 0, trustedUntilMs: trusted[key] ?? 0)
    }

    /// Takes `state` as what it holds for `user` at `address`, as `begin` takes a database's.
    mutating func adopt(_ state: LoginLimitState, user: String, address: String) {
        load(state, for: PairKey(user: user, address: LoginThrottle.addressKey(address)))
    }

    private mutating func load(_ shared: LoginLimitState, for key: PairKey) {
        pairs[key] = shared.failures > 0 || shared.blockedUntilMs > 0
            ? Pair(failures: shared.failures, blockedUntilMs: shared.blockedUntilMs, lastAttemptMs: shared.lastAttemptMs) : nil
        budgets[key.address] = shared.creditMs.map { Budget(creditMs: $0, updatedMs: shared.creditUpdatedMs) }
        trusted[key] = shared.trustedUntilMs > 0 ? shared.trustedUntilMs : nil
    }

    private func isTrusted(_ key: PairKey, nowMs: UInt64) -> Bool { (trusted[key] ?? 0) > nowMs }

    /// The wait after a pair's `failures`th failure, from the `freeFailures`th on:
    /// `backoffMs`, doubled with each further failure (40 times at most), up to
    /// `maxBackoffMs`, never wrapping around.
    static func backoff(after failures: Int, _ settings: Settings) -> UInt64 {
        let doublings = min(max(0, failures - settings.freeFailures), 40)
        let (wait, overflow) = settings.backoffMs.multipliedReportingOverflow(by: UInt64(1) << UInt64(doublings))
        return min(settings.maxBackoffMs, overflow ? .max : wait)
    }

    /// How much later than now a pair's last attempt may be without the clock being taken
    /// for stepped back: the stores of one database have clocks that differ a little, and
    /// attempts in flight together are written in any order (one decided again after
    /// another was written, `LoginLimitChange.redecided`). Were those taken for a clock
    /// stepped back, concurrent failures would start their pair afresh and never reach the
    /// limit.
    static let clockStepMs: UInt64 = 1_000

    /// Whether a wall clock at `nowMs` has stepped back behind an attempt made at `lastMs`.
    static func steppedBack(from lastMs: UInt64, to nowMs: UInt64) -> Bool {
        lastMs > nowMs && lastMs - nowMs > clockStepMs
    }

    /// Until when a success at `nowMs` trusts its pair.
    static func trustedUntil(nowMs: UInt64, _ settings: Settings) -> UInt64 {
        let (until, overflow) = nowMs.addingReportingOverflow(settings.trustedForMs)
        return overflow ? .max : until
    }

    private mutating func store(_ budget: Budget, for address: String) {
        if budgets[address] == nil && budgets.count >= LoginThrottle.capacity {
            prune(nowMs: budget.updatedMs)
            if budgets.count >= LoginThrottle.capacity { budgets.removeAll() }
        }
        budgets[address] = budget
    }

    private mutating func store(_ pair: Pair, for key: PairKey) {
        if pairs[key] == nil && pairs.count >= LoginThrottle.capacity {
            prune(nowMs: pair.lastAttemptMs)
            if pairs.count >= LoginThrottle.capacity { pairs.removeAll() }
        }
        pairs[key] = pair
    }

    /// Forgets what no longer limits anyone: full budgets, idle pairs, lapsed trust.
    mutating func prune(nowMs: UInt64) {
        budgets = budgets.filter {
            !LoginLimitState(creditMs: $0.value.creditMs, creditUpdatedMs: $0.value.updatedMs).budgetRefilled(atMs: nowMs, settings)
        }
        pairs = pairs.filter {
            !LoginLimitState(blockedUntilMs: $0.value.blockedUntilMs, lastAttemptMs: $0.value.lastAttemptMs).pairIdle(atMs: nowMs)
        }
        trusted = trusted.filter { $0.value > nowMs }
    }

    /// The last attempt of a pair idle since then, at `nowMs` (`LoginLimitState.pairIdle`).
    package static func idleSince(nowMs: UInt64) -> UInt64 { nowMs > pairMemoryMs ? nowMs - pairMemoryMs : 0 }

    var trackedCount: Int { pairs.count + budgets.count }
    var trustedCount: Int { trusted.count }

    /// The key an address is limited under: IPv4 as written, IPv6 by its /64 (an IPv4
    /// address mapped into IPv6 counts as IPv4).
    static func addressKey(_ address: String) -> String {
        guard address.contains(":") else { return address }
        var bytes = [UInt8](repeating: 0, count: 16)
        let host = address.split(separator: "%", maxSplits: 1).first.map(String.init) ?? address
        guard inet_pton(AF_INET6, host, &bytes) == 1 else { return address }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return bytes[12...].map(String.init).joined(separator: ".")
        }
        let words = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return words.joined(separator: ":") + "::/64"
    }
}

/// The login limits' state for one (user, address) pair as a database shared by several
/// stores holds it, so that spreading guesses over the stores gains nothing. What an
/// attempt makes of it is decided by `after`, the rule; the database only keeps it.
public struct LoginLimitState: Sendable, Equatable {
    /// The pair's failures since its last success, its wait, and its last attempt.
    public var failures: Int
    public var blockedUntilMs: UInt64
    public var lastAttemptMs: UInt64
    /// The address's budget in ms of refill (nil: untouched, so full) and when it was set.
    public var creditMs: Int64?
    public var creditUpdatedMs: UInt64
    /// Until when the user is trusted from this address (0: not).
    public var trustedUntilMs: UInt64

    public init(failures: Int = 0, blockedUntilMs: UInt64 = 0, lastAttemptMs: UInt64 = 0, creditMs: Int64? = nil,
                creditUpdatedMs: UInt64 = 0, trustedUntilMs: UInt64 = 0) {
        self.failures = failures
        self.blockedUntilMs = blockedUntilMs
        self.lastAttemptMs = lastAttemptMs
        self.creditMs = creditMs
        self.creditUpdatedMs = creditUpdatedMs
        self.trustedUntilMs = trustedUntilMs
    }
}

extension LoginLimitState {
    /// The rule of [8-10], [8-11] and [8-12], the one place it is stated: what the limits
    /// hold for a pair and its address after `attempt`, from what they held. A store's own
    /// memory (`LoginThrottle.finish`) and a database shared by several stores
    /// (`PostgresLimitWriter`) both keep what this returns; neither counts by itself.
    ///
    /// - A success clears the pair and trusts it for `trustedForMs`, never shortening a
    ///   trust already given (successes at stores whose clocks differ a little then leave
    ///   the same trust whichever is written last); the budget is left as it is.
    /// - A failure counts for the pair (one whose last attempt is more than `clockStepMs`
    ///   later than now, a clock stepped back, starts afresh); from the `freeFailures`th on it holds the pair back
    ///   for `LoginThrottle.backoff`, never less than a wait already set. Unless the pair is
    ///   trusted, it takes one failure's cost from the address's budget, refilled first.
    func after(_ attempt: LoginAttempt, _ settings: LoginThrottle.Settings) -> LoginLimitState {
        let nowMs = attempt.nowMs
        var next = self
        guard !attempt.succeeded else {
            next.failures = 0
            next.blockedUntilMs = 0
            next.lastAttemptMs = 0
            next.trustedUntilMs = max(trustedUntilMs, LoginThrottle.trustedUntil(nowMs: nowMs, settings))
            return next
        }
        if LoginThrottle.steppedBack(from: lastAttemptMs, to: nowMs) {
            next.failures = 0
            next.blockedUntilMs = 0
            next.lastAttemptMs = 0
        }
        next.failures += 1
        next.lastAttemptMs = max(next.lastAttemptMs, nowMs)
        if next.failures >= settings.freeFailures {
            let (until, overflow) = nowMs.addingReportingOverflow(LoginThrottle.backoff(after: next.failures, settings))
            next.blockedUntilMs = max(next.blockedUntilMs, overflow ? .max : until)
        }
        if trustedUntilMs <= nowMs {
            next.creditMs = creditMs(atMs: nowMs, settings) - settings.failureCostMs
            next.creditUpdatedMs = nowMs
        }
        return next
    }

    /// The address's budget at `nowMs`: refilled one ms of credit per ms since it was last
    /// changed, up to full (an untouched budget is full). A clock stepped back refills
    /// nothing for the step.
    func creditMs(atMs nowMs: UInt64, _ settings: LoginThrottle.Settings) -> Int64 {
        let full = settings.fullCreditMs
        guard let creditMs else { return full }
        let elapsed = nowMs > creditUpdatedMs ? Int64(min(nowMs - creditUpdatedMs, UInt64(Int64.max / 2))) : 0
        return min(full, creditMs + elapsed)
    }

    /// Whether the address's budget has refilled by `nowMs` ([8-11]): it limits no one,
    /// and may be forgotten. One changed later than now (a clock stepped back) is kept.
    package func budgetRefilled(atMs nowMs: UInt64, _ settings: LoginThrottle.Settings) -> Bool {
        creditUpdatedMs <= nowMs && creditMs(atMs: nowMs, settings) >= settings.fullCreditMs
    }

    /// Whether the pair is not held back and has had no attempt for
    /// `LoginThrottle.pairMemoryMs` at `nowMs` ([8-10]): it may be forgotten (its trust is
    /// kept apart, until it runs out).
    func pairIdle(atMs nowMs: UInt64) -> Bool {
        blockedUntilMs <= nowMs && lastAttemptMs <= LoginThrottle.idleSince(nowMs: nowMs)
    }

    /// Whether the pair's part (failures, wait, last attempt, trust) equals `other`'s.
    package func samePair(as other: LoginLimitState) -> Bool {
        failures == other.failures && blockedUntilMs == other.blockedUntilMs && lastAttemptMs == other.lastAttemptMs
            && trustedUntilMs == other.trustedUntilMs
    }

    /// Whether the address's budget equals `other`'s.
    func sameBudget(as other: LoginLimitState) -> Bool { creditMs == other.creditMs && creditUpdatedMs == other.creditUpdatedMs }
}

/// A checked LOGIN's outcome, to be counted in the shared login limits.
public struct LoginAttempt: Sendable, Equatable {
    public var key: LoginLimitKey
    public var succeeded: Bool
    public var nowMs: UInt64
}

/// A LOGIN's outcome as decided by the rule (`LoginLimitState.after`): the limits of its
/// pair and address as the deciding store knew them, and as they are to be. A database
/// shared by stores writes `after` only where it still holds `before`, and otherwise has
/// the rule decide again from what it holds (`redecided`): it binds values, never counts.
public struct LoginLimitChange: Sendable, Equatable {
    public var attempt: LoginAttempt
    public var before: LoginLimitState
    public var after: LoginLimitState

    public init(attempt: LoginAttempt, before: LoginLimitState, after: LoginLimitState) {
        self.attempt = attempt
        self.before = before
        self.after = after
    }

    package var key: LoginLimitKey { attempt.key }
    package var changesPair: Bool { !after.samePair(as: before) }
    package var changesBudget: Bool { !after.sameBudget(as: before) }

    /// The same attempt decided again from `current`, what the database holds now, for
    /// the parts not yet written (`pair`, `budget`); a part already written is left as
    /// `current` has it, so it is not counted twice.
    package func redecided(from current: LoginLimitState, pair: Bool, budget: Bool, _ settings: LoginThrottle.Settings) -> LoginLimitChange {
        let decided = current.after(attempt, settings)
        var after = current
        if pair {
            after.failures = decided.failures
            after.blockedUntilMs = decided.blockedUntilMs
            after.lastAttemptMs = decided.lastAttemptMs
            after.trustedUntilMs = decided.trustedUntilMs
        }
        if budget {
            after.creditMs = decided.creditMs
            after.creditUpdatedMs = decided.creditUpdatedMs
        }
        return LoginLimitChange(attempt: attempt, before: current, after: after)
    }
}
