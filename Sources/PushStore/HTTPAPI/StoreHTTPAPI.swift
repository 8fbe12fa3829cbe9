import Logging
import PushClock
import PushEventLoop
import PushProviderAPI
import PushService
import PushStoreLogic
import PushWire

/// Where the store serves its HTTP provider API (`store --http`, `store.http`), and how.
public struct StoreHTTPConfiguration: Sendable {
    public var host: String
    /// 0 picks a free port.
    public var port: Int
    public var limits: HTTPServerLimits
    /// Open HTTP connections at once, over all loops; apart from the protocol's own cap.
    public var maxConnections: Int
    /// Open HTTP connections from one client address at once, so that one address cannot
    /// take every place.
    public var maxConnectionsPerAddress: Int

    public static let defaultMaxConnections = 1024
    public static let defaultMaxConnectionsPerAddress = 256

    public init(host: String, port: Int, limits: HTTPServerLimits = HTTPServerLimits(),
                maxConnections: Int = StoreHTTPConfiguration.defaultMaxConnections,
                maxConnectionsPerAddress: Int = StoreHTTPConfiguration.defaultMaxConnectionsPerAddress) {
        self.host = host
        self.port = port
        self.limits = limits
        self.maxConnections = maxConnections
        self.maxConnectionsPerAddress = maxConnectionsPerAddress
    }
}

/// The HTTP provider API on one loop of the store: `POST /v1/messages` is SEND,
/// `GET /v1/messages/{id}` STATUS, `DELETE /v1/messages/{id}` RECALL and
/// `GET /v1/recipients/{name}/keys` KEYS, each authorised by
/// an API token (`Authorization: Bearer`) and served by the same request path as the
/// protocol's requests (`StoreServer`). Loop-confined.
final class StoreHTTPAPI {
    private let server: StoreServer
    private let http: HTTPServer
    private let logger: Logger
    private let metrics: StoreHTTPMetrics
    private var refusedTokenLog = LogThrottle()
    /// The tokens this loop accepted, kept while the tokens' cursor stands still.
    private let tokens = APITokenCache()
    /// Set by a drain: what arrives from then on is answered 503 SHUTTING_DOWN.
    private var draining = false

    var port: Int { http.port }

    /// Serves on `http`'s address, or on the sockets the first loop of the store bound.
    init(server: StoreServer, configuration: StoreHTTPConfiguration, tls: TLSContext?, shared: StoreHTTPShared, speaksForProcess: Bool,
         logger: Logger, loop: EventLoop) throws(EventLoopError) {
        self.server = server
        self.logger = logger
        metrics = StoreHTTPMetrics(registry: server.metrics.registry, shared: shared, speaksForProcess: speaksForProcess)
        var handler: ((HTTPServerRequest) -> Void)?
        let handle: (HTTPServerRequest) -> Void = { request in handler?(request) }
        if let sockets = shared.sockets {
            http = try HTTPServer(loop: loop, sharing: sockets, limits: configuration.limits, gate: shared.gate,
                                  errorPages: ProviderAPIProblem.errorPages, handle: handle)
        } else {
            http = try HTTPServer(loop: loop, host: configuration.host, port: configuration.port, tls: tls,
                                  limits: configuration.limits, gate: shared.gate, errorPages: ProviderAPIProblem.errorPages,
                                  handle: handle)
            shared.sockets = try http.sharedSockets()
        }
        metrics.watch(http)
        handler = { [unowned self] request in serve(request) }
        http.vetContinue = { [unowned self] pending in vet(pending) }
    }

    /// How long a drain waits, once every request taken is answered, for the answers to
    /// be written: as long as the protocol's connections get ([5.5-1]).
    static let drainFlushLimit = Duration.seconds(2)

    /// Graceful stop: what arrives from now on is answered 503 SHUTTING_DOWN; what was
    /// taken is answered with its result; every answer closes its connection once written.
    /// `drained` runs once all are written (or `drainFlushLimit` after the last is
    /// answered), before the HTTP server may be freed.
    func drain(then drained: @escaping () -> Void) {
        draining = true
        http.drain(within: StoreHTTPAPI.drainFlushLimit, then: drained)
    }

    func stop() { http.stop() }

    private func serve(_ request: HTTPServerRequest) {
        let startNs = Clocks.monotonicNanoseconds()
        let route: ProviderAPIRoute
        do throws(ProviderAPIProblem) {
            route = try ProviderAPIRoute.of(method: request.method.name, path: request.path)
        } catch {
            return answer(request, .problem(error), route: nil, provider: nil)
        }
        guard !draining else {
            return answer(request, .problem(ProviderAPIProblem(503, Status.shuttingDown.name, "the store is shutting down",
                                                               headers: [("Retry-After", "1"), ("Connection", "close")])),
                          route: route, provider: nil)
        }
        // A token this loop keeps is checked by the request's own read: the tokens' cursor
        // rides with what the request reads anyway (one statement on PostgreSQL).
        if let authorization = request.header("Authorization"), let token = StoreHTTPAPI.bearer(authorization).flatMap(APIToken.parse),
           let kept = tokens.accepted(id: token.id, secret: token.secret), kept.scopes.contains(route.scope),
           !server.logic.tokensLimited(address: request.peerHost),
           let message = try? ProviderAPIRequest.message(for: route, header: request.headers(named:), body: request.body) {
            return serve(message, of: request, route: route, keptToken: token, record: kept, startNs: startNs)
        }
        serveAuthorizing(request, route: route, startNs: startNs)
    }

    /// A request whose token is checked before anything else is read: one this loop does not
    /// keep, or any request that is to be refused (which this path words).
    private func serveAuthorizing(_ request: HTTPServerRequest, route: ProviderAPIRoute, startNs: UInt64) {
        authorize(request.header("Authorization"), route: route, method: request.method.name, peer: request.peerHost) { [weak self] outcome in
            guard let self else { return }
            let record: APITokenRecord
            switch outcome {
            case .refused(let problem, let provider): return answer(request, .problem(problem), route: route, provider: provider)
            case .accepted(let accepted): record = accepted
            }
            let message: Message
            do throws(ProviderAPIProblem) {
                message = try ProviderAPIRequest.message(for: route, header: request.headers(named:), body: request.body)
            } catch {
                return answer(request, .problem(error), route: route, provider: record.provider)
            }
            server.serve(message, call: call(for: request, route: route, record: record, startNs: startNs))
        }
    }

    /// A request with a token this loop keeps: served with the tokens' cursor read among its
    /// own reads. Where the cursor moved and the token is no longer kept, the request starts
    /// over on `serveAuthorizing`, which reads the token's row: a revocation by any process
    /// is seen by the very request that follows it.
    private func serve(_ message: Message, of request: HTTPServerRequest, route: ProviderAPIRoute, keptToken token: (id: String, secret: [UInt8]),
                       record: APITokenRecord, startNs: UInt64) {
        server.serve(message, call: call(for: request, route: route, record: record, startNs: startNs)) { [weak self] result in
            guard let self else { return false }
            guard case .success(let found) = result, let revision = found.apiTokensRevision else {
                answer(request, .problem(ProviderAPIProblem(503, Status.internalError.name, "cannot read the API tokens",
                                                            headers: [("Retry-After", "1")])), route: route, provider: nil)
                return false
            }
            tokens.observe(revision: revision)
            guard tokens.accepted(id: token.id, secret: token.secret) != nil else {
                serveAuthorizing(request, route: route, startNs: startNs)
                return false
            }
            return true
        }
    }

    private func call(for request: HTTPServerRequest, route: ProviderAPIRoute, record: APITokenRecord, startNs: UInt64) -> StoreHTTPCall {
        let session = StoreSession(peerAddress: request.peerHost, role: .provider, provider: ProviderIdentity(apiToken: record))
        return StoreHTTPCall(session: session, startNs: startNs) { [weak self] reply, createdAt in
            self?.answer(request, .answering(reply, to: route, createdAt: createdAt, ifNoneMatch: request.headers(named: "If-None-Match")),
                         route: route, provider: record.provider)
        }
    }

    /// What checking a request's API token came to.
    private enum Authorization {
        case accepted(APITokenRecord)
        /// The problem to answer, and the token's provider once the token was accepted.
        case refused(ProviderAPIProblem, provider: String?)
    }

    /// The API token checks of a request for `route`, the same for a whole request (`serve`)
    /// and for a head held before its body (`vet`): a bearer token, not refused too often
    /// from this address, known, not revoked, the secret right, with the route's scope.
    /// Answers at once, or after the token's read.
    private func authorize(_ authorization: String?, route: ProviderAPIRoute, method: String, peer: String,
                           then decide: @escaping (Authorization) -> Void) {
        guard let authorization else {
            return decide(.refused(ProviderAPIProblem(401, Status.authRequired.name, "send an API token: Authorization: Bearer <token>",
                                                      headers: [("WWW-Authenticate", "Bearer")]), provider: nil))
        }
        guard !server.logic.tokensLimited(address: peer) else {
            server.logRateLimited(request: "HTTP \(method) \(route.name)", peer: peer, reason: "too many refused API tokens from this address")
            return decide(.refused(ProviderAPIProblem(429, Status.rateLimited.name, "too many rejected tokens from this address; try again later",
                                                      headers: [("Retry-After", "10")]), provider: nil))
        }
        guard let token = StoreHTTPAPI.bearer(authorization).flatMap(APIToken.parse) else {
            server.logic.apiTokenRefused(address: peer)
            refusedToken(nil, known: nil, peer: peer)
            return decide(.refused(ProviderAPIProblem(401, Status.badToken.name, "not an API token: Authorization: Bearer sp_...",
                                                      headers: [("WWW-Authenticate", "Bearer error=\"invalid_token\"")]), provider: nil))
        }
        check(token, readingRow: !tokens.holds(token.id), route: route, peer: peer, then: decide)
    }

    /// Reads the tokens' change cursor, with the token's row when it is not kept (or no
    /// longer is), and decides. A kept token costs the cursor alone; the row is read again
    /// only after a change to the tokens, by this process or any other.
    private func check(_ token: (id: String, secret: [UInt8]), readingRow: Bool, route: ProviderAPIRoute, peer: String,
                       then decide: @escaping (Authorization) -> Void) {
        server.read(StoreReads(apiToken: readingRow ? token.id : nil, apiTokensRevision: true)) { [weak self] result in
            guard let self else { return }
            guard case .success(let found) = result else {
                return decide(.refused(ProviderAPIProblem(503, Status.internalError.name, "cannot read the API tokens",
                                                          headers: [("Retry-After", "1")]), provider: nil))
            }
            if let revision = found.apiTokensRevision { tokens.observe(revision: revision) }
            let record: APITokenRecord
            if let kept = tokens.accepted(id: token.id, secret: token.secret) {
                record = kept
            } else if !readingRow {
                // Forgotten since (the tokens changed), or another secret: the row decides.
                return check(token, readingRow: true, route: route, peer: peer, then: decide)
            } else {
                guard let read = found.apiToken, APIToken.accepts(token.secret, read) else {
                    server.logic.apiTokenRefused(address: peer)
                    refusedToken(token.id, known: found.apiToken, peer: peer)
                    return decide(.refused(ProviderAPIProblem(401, Status.badToken.name, "unknown or revoked API token",
                                                              headers: [("WWW-Authenticate", "Bearer error=\"invalid_token\"")]), provider: nil))
                }
                if let revision = found.apiTokensRevision { tokens.remember(read, secret: token.secret, readAt: revision) }
                record = read
            }
            guard record.scopes.contains(route.scope) else {
                return decide(.refused(ProviderAPIProblem(403, Status.forbidden.name, "this token may not \(route.scope); it may: \(record.scopes)"),
                                       provider: record.provider))
            }
            decide(.accepted(record))
        }
    }

    /// A request with `Expect: 100-continue`, before its body: its route and token are
    /// checked first, so a request that would be refused is answered without its body
    /// being sent. One that passes is checked again, whole, by `serve`.
    private func vet(_ pending: HTTPContinueRequest) {
        let route: ProviderAPIRoute
        do throws(ProviderAPIProblem) {
            route = try ProviderAPIRoute.of(method: pending.head.method, path: pending.head.path)
        } catch {
            return refuse(pending, error, route: nil, provider: nil)
        }
        authorize(pending.head.header("Authorization"), route: route, method: pending.head.method, peer: pending.peerHost) { [weak self] outcome in
            switch outcome {
            case .accepted: pending.proceed()
            case .refused(let problem, let provider): self?.refuse(pending, problem, route: route, provider: provider)
            }
        }
    }

    private func refuse(_ pending: HTTPContinueRequest, _ problem: ProviderAPIProblem, route: ProviderAPIRoute?, provider: String?) {
        let response = ProviderAPIResponse.problem(problem)
        pending.refuse(status: response.status, reason: ProviderAPIProblem.reason(response.status), headers: response.headers,
                       body: response.body)
        metrics.answered(route: route, status: response.status, provider: provider)
    }

    /// The token of an `Authorization: Bearer` header (RFC 6750: the scheme is case-insensitive).
    static func bearer(_ header: String) -> String? {
        let utf8 = header.utf8
        var at = utf8.startIndex
        while at != utf8.endIndex, utf8[at] == UInt8(ascii: " ") { at = utf8.index(after: at) }
        for expected in "bearer".utf8 {
            guard at != utf8.endIndex, utf8[at] | 0x20 == expected else { return nil }
            at = utf8.index(after: at)
        }
        guard at != utf8.endIndex, utf8[at] == UInt8(ascii: " ") else { return nil }
        while at != utf8.endIndex, utf8[at] == UInt8(ascii: " ") || utf8[at] == UInt8(ascii: "\t") { at = utf8.index(after: at) }
        var end = utf8.endIndex
        while end != at, utf8[utf8.index(before: end)] == UInt8(ascii: " ") || utf8[utf8.index(before: end)] == UInt8(ascii: "\t") {
            end = utf8.index(before: end)
        }
        guard at != end else { return nil }
        return String(header[at..<end])
    }

    private func answer(_ request: HTTPServerRequest, _ response: ProviderAPIResponse, route: ProviderAPIRoute?, provider: String?) {
        request.respond(status: response.status, reason: ProviderAPIProblem.reason(response.status), headers: response.headers,
                        body: response.body)
        metrics.answered(route: route, status: response.status, provider: provider)
    }

    /// Logged at most once a second (a client can retry as fast as it likes); never the secret.
    private func refusedToken(_ id: String?, known: APITokenRecord?, peer: String) {
        metrics.refusedTokens.increment()
        guard let count = refusedTokenLog.event(nowMs: Clocks.monotonicMilliseconds()) else { return }
        let reason = id == nil ? "not a token" : known == nil ? "unknown token" : known?.revokedAt != nil ? "revoked" : "wrong secret"
        var metadata: Logger.Metadata = ["peer": "\(peer)", "reason": "\(reason)"]
        if let id { metadata["token"] = "\(id)" }
        if let provider = known?.provider { metadata["provider"] = "\(provider)" }
        if count > 1 { metadata["count"] = "\(count)" }
        logger.info("API token refused", metadata: metadata)
    }
}

extension HTTPServerRequest {
    /// Every value of header `name` (case-insensitive, ASCII), in arrival order.
    fileprivate func headers(named name: String) -> [String] {
        var values: [String] = []
        let wanted = Array(name.utf8)
        for header in headers where header.name.utf8.count == wanted.count {
            var same = true
            var index = 0
            for byte in header.name.utf8 {
                same = same && byte | 0x20 == wanted[index] | 0x20
                index += 1
            }
            if same { values.append(header.value) }
        }
        return values
    }
}

extension ProviderAPIRoute {
    /// What a token needs to be allowed this.
    var scope: APITokenScopes {
        switch self {
        case .send: .send
        case .status: .status
        case .recall: .recall
        case .keys: .keys
        }
    }

    /// As the metrics and logs name it.
    var name: String {
        switch self {
        case .send: "send"
        case .status: "status"
        case .recall: "recall"
        case .keys: "keys"
        }
    }
}

extension HTTPMethod {
    /// The method as the request line spells it; "other" for one the server does not name.
    fileprivate var name: String {
        switch self {
        case .get: "GET"
        case .post: "POST"
        case .delete: "DELETE"
        case .head: "HEAD"
        case .put: "PUT"
        case .patch: "PATCH"
        case .options: "OPTIONS"
        case .other: "OTHER"
        }
    }
}
