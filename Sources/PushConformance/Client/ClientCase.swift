import PushSession

/// The limits the harness's two servers grant a client; a case may change them before
/// its servers start (a short keepalive, a small max_inflight).
public struct HarnessLimits: Sendable {
    public var store: ServiceLimits
    public var gateway: ServiceLimits

    static var faithful: HarnessLimits {
        var store = ServiceLimits(name: "conformance-store", served: [.fetch, .sync, .ack, .login, .store, .send, .recall, .status, .keys])
        store.maxInflight = 32
        var gateway = ServiceLimits(name: "conformance-gateway", served: [.push])
        gateway.maxInflight = 32
        return HarnessLimits(store: store, gateway: gateway)
    }
}

/// Which kind of client a run grades.
public enum ClientKind: String, Sendable, CaseIterable {
    case device
    case provider
}

/// One check of a client: the harness plays the servers (faithfully, or faulty where the
/// case says), watches the client's frames and its stdout, and judges one clause.
public struct ClientCase: Sendable {
    typealias Body = @Sendable (ClientHarness) throws(CaseStop) -> String

    public var id: String
    public var clause: String
    public var title: String
    public var kind: ClientKind
    let limits: @Sendable (inout HarnessLimits) -> Void
    let body: Body

    init(_ id: String, clause: String, _ title: String, kind: ClientKind = .device,
         limits: @escaping @Sendable (inout HarnessLimits) -> Void = { _ in }, body: @escaping Body) {
        self.id = id
        self.clause = clause
        self.title = title
        self.kind = kind
        self.limits = limits
        self.body = body
    }

    public func matches(_ selector: String) -> Bool {
        ConformanceCase.matches(id: id, clause: clause, selector)
    }
}

/// What a client run needs.
public struct ClientSuiteOptions: Sendable {
    public var kind: ClientKind
    public var command: ClientCommandLine
    /// How long to wait for anything the client is expected to do.
    public var timeoutMs: Int64 = 5_000
    /// CASE arguments: ids, id prefixes, clauses or clause prefixes; empty runs all.
    public var selection: [String] = []
    /// Cases run side by side: each has its own servers, ports, state and client.
    public var jobs = 1
    /// Called with a failed case's id and the harness's log of it, one line an event.
    public var traceFailure: (@Sendable (String, [String]) -> Void)?
    var storeLimits = HarnessLimits.faithful.store
    var gatewayLimits = HarnessLimits.faithful.gateway

    public init(kind: ClientKind, command: ClientCommandLine) {
        self.kind = kind
        self.command = command
    }
}
