import PushWire

/// The store's limits and lifetimes; `StoreConfiguration(deployment:)` takes some from
/// the deployment's config file, and `securepush store` from its flags.
public struct StoreSettings: Sendable {
    public var maxPayloadBytes = 4096
    public var maxTTLSeconds: UInt32 = 30 * 24 * 3600
    public var tokenLifetimeMs: UInt64 = 3_600_000
    /// Failed logins allowed per user, and per client address, within `loginFailureWindowMs`.
    public var loginFailuresPerUser = 5
    public var loginFailuresPerAddress = 20
    public var loginFailureWindowMs: UInt64 = 60_000
    /// BAD_TOKEN answers allowed per client address within `badTokenWindowMs`; past them
    /// every request that carries a token is RATE_LIMITED until the window ends ([8-5]).
    public var badTokensPerAddress = 20
    public var badTokenWindowMs: UInt64 = 10_000
    public var sweepIntervalMs: UInt64 = 60_000

    public init() {}
}
