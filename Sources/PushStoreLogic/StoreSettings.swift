import PushSecurity
import PushWire

/// The store's limits and lifetimes; `StoreConfiguration(deployment:)` takes some from
/// the deployment's config file, and `securepush store` from its flags.
public struct StoreSettings: Sendable {
    public var maxPayloadBytes = 4096
    public var maxTTLSeconds: UInt32 = 30 * 24 * 3600
    public var tokenLifetimeMs: UInt64 = 3_600_000
    /// LOGIN limits ([8-5], `LoginThrottle`): a (user, client address) pair may fail
    /// `loginFreeFailures` times in a row; then it waits `loginBackoffMs` before its next
    /// attempt, twice that after each further failure, at most `loginMaxBackoffMs`.
    public var loginFreeFailures = 3
    public var loginBackoffMs: UInt64 = 1_000
    public var loginMaxBackoffMs: UInt64 = 300_000
    /// Failed LOGINs one client address (an IPv6 /64) may make in a burst; it gets one back
    /// every `loginFailureRefillMs`.
    public var loginFailuresPerAddress = 20
    public var loginFailureRefillMs: UInt64 = 3_000
    /// How long a successful LOGIN exempts that user at that address from the address's budget.
    public var loginTrustedForMs: UInt64 = 30 * 24 * 3_600_000
    /// How often the login and token limiters forget what no longer limits anyone.
    public var loginFailureWindowMs: UInt64 = 60_000
    /// BAD_TOKEN answers allowed per client address within `badTokenWindowMs`; past them
    /// every request that carries a token is RATE_LIMITED until the window ends ([8-5]).
    public var badTokensPerAddress = 20
    public var badTokenWindowMs: UInt64 = 10_000
    public var sweepIntervalMs: UInt64 = 60_000
    /// How often, at most, the store asks whether another process changed the users (a
    /// removal, a re-added name): once per this many ms of its clock, and never more than
    /// this late. 0 asks before every request.
    public var usersRecheckMs: UInt64 = 1
    /// Whether a gateway to hand SENDs' pushes to is configured (`--gateway`): without one
    /// the store refuses SEND rather than keep pushes that nothing will deliver.
    public var forwardsPushes = false
    /// On PostgreSQL, how long a SEND's push is left to the store that committed (or last
    /// claimed) it before another store may claim it ([4.17-4]).
    public var outboxLeaseMs: UInt64 = 30_000
    /// PBKDF2 iterations of the hash an unknown user's LOGIN is checked against
    /// (`PasswordHash.dummy`), so that it takes as long as a known user's wrong password
    /// ([8-4]): the deployment's `password.iterations`, which its new hashes use.
    public var passwordIterations = PasswordHash.defaultIterations

    public init() {}
}
