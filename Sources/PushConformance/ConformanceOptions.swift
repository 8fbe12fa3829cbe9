import PushSecurity
import PushEventLoop

/// The deployment's secrets, from `securepush init`'s directory: with them the suite
/// makes provider credentials, device registrations and fetch tokens exactly as the
/// deployment's own tools would (SPEC.md section 7).
public struct ConformanceKeys: Sendable {
    public var serverKey: SecretKey
    public var providerKey: SecretKey
    /// The deployment directory, when the keys came from one: if the store under test
    /// keeps its database there, the suite enrolls and revokes devices in its registry.
    public var dataDirectory: String?

    public init(serverKey: SecretKey, providerKey: SecretKey, dataDirectory: String? = nil) {
        self.serverKey = serverKey
        self.providerKey = providerKey
        self.dataDirectory = dataDirectory
    }

    public init(deployment: Deployment) {
        self.init(serverKey: deployment.serverKey, providerKey: deployment.providerKey, dataDirectory: deployment.directory)
    }
}

/// Everything a run needs. Absent parts make the cases that need them SKIPPED.
public struct ConformanceOptions: Sendable {
    public var store: HostPort?
    public var gateway: HostPort?
    public var keys: ConformanceKeys?
    /// A user the store knows: STORE needs a recipient that exists.
    public var user: String?
    /// The user's password, for the LOGIN cases.
    public var password: [UInt8]?
    /// A device enrolled for `user` in the store's registry: LOGIN and fetch tokens need
    /// one ([4.6-4], [7.3-3]). Without it the suite enrolls its own when the store's
    /// database is in the `--data-dir` it was given.
    public var device: String?
    /// Where the golden vectors are; nil uses the ones built into the binary.
    public var vectorsDirectory: String?
    /// TLS to the services; nil for plain TCP.
    public var tls: ConformanceTLS?
    /// Runs the cases that wait 45 seconds or a full keepalive interval.
    public var slow = false
    /// How long to wait for any one reply.
    public var timeoutMs: Int32 = 5_000
    /// How long silence must last to count as "no answer" ([5.6-3]).
    public var quietMs: Int32 = 300
    /// The handshake deadline ([5.1-6]) of the service the case talks to (the store when
    /// given, else the gateway); the spec's default unless it was configured otherwise.
    public var handshakeDeadlineMs: Int64 = 5_000
    /// The frame deadline ([5.4-5]) of the service the case talks to (the gateway when
    /// given with the keys, else the store).
    public var frameDeadlineMs: Int64 = 10_000
    /// The gateway's delivery window in pushes and its output cap in bytes, which bounds
    /// the bytes of unacknowledged pushes too ([4.14-5]); the spec's defaults unless the
    /// gateway was configured otherwise.
    public var gatewayDeliveryWindow = 64
    public var gatewayMaxOutputBytes = 65_536
    /// The gateway's stall limit ([5.5-7]); the spec's default unless the gateway was
    /// configured otherwise, 0 when it has the rule turned off.
    public var gatewayOutputStallMs: Int64 = 10_000
    /// How late a timer may fire ([5.4-6]), plus room for the suite's own scheduling.
    public var timerSlackMs: Int64 = 1_500
    /// CASE arguments: ids, id prefixes, clauses or clause prefixes; empty runs all.
    public var selection: [String] = []

    public init(store: HostPort? = nil, gateway: HostPort? = nil, keys: ConformanceKeys? = nil, user: String? = nil,
                password: [UInt8]? = nil) {
        self.store = store
        self.gateway = gateway
        self.keys = keys
        self.user = user
        self.password = password
    }
}
