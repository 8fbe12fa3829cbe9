import FoundationEssentials
import PushClock
import PushEventLoop
import PushWire

/// An error answer of the HTTP provider API: an RFC 9457 problem document
/// (`application/problem+json`) whose `code` is the protocol status name the same
/// failure has on the binary protocol (SPEC.md section 6).
struct ProviderAPIProblem: Error, Equatable {
    var httpStatus: Int
    var code: String
    var detail: String
    var headers: [(String, String)] = []

    static func == (lhs: ProviderAPIProblem, rhs: ProviderAPIProblem) -> Bool {
        lhs.httpStatus == rhs.httpStatus && lhs.code == rhs.code && lhs.detail == rhs.detail
    }

    init(_ httpStatus: Int, _ code: String, _ detail: String, headers: [(String, String)] = []) {
        self.httpStatus = httpStatus
        self.code = code
        self.detail = detail
        self.headers = headers
    }

    /// The answer to a protocol ERROR. `keyedSend`: the request was a SEND with an
    /// idempotency key, whose BUSY means "the first request with this key is still being
    /// committed" (409, as for a concurrent retry of any idempotent POST).
    init(_ error: ErrorReply, keyedSend: Bool = false) {
        let detail = error.message ?? error.status.name
        let retry = [("Retry-After", "1")]
        switch error.status {
        case .badRequest, .unknownUser: self.init(422, error.status.name, detail)
        case .authRequired, .badToken, .tokenExpired, .badCredentials, .revoked:
            self.init(401, error.status.name, detail, headers: [("WWW-Authenticate", "Bearer")])
        case .forbidden: self.init(403, error.status.name, detail)
        case .notFound: self.init(404, error.status.name, detail)
        case .gone: self.init(410, error.status.name, detail)
        case .conflict: self.init(409, error.status.name, detail)
        case .tooLarge, .frameTooLarge: self.init(413, error.status.name, detail)
        case .rateLimited: self.init(429, error.status.name, detail, headers: retry)
        case .busy where keyedSend: self.init(409, error.status.name, detail, headers: retry)
        case .busy, .shuttingDown, .internalError, .timeout, .slowConsumer:
            // INTERNAL is a commit that failed (the database is unreachable, say): the
            // request left nothing behind and may be retried.
            self.init(503, error.status.name, detail, headers: retry)
        default: self.init(500, error.status.name, detail)
        }
    }

    /// The problem document.
    var body: [UInt8] {
        let document = Document(title: ProviderAPIProblem.reason(httpStatus), status: httpStatus, detail: detail, code: code)
        return (try? ProviderAPIJSON.encoder.encode(document)).map(Array.init) ?? []
    }

    private struct Document: Encodable {
        var type = "about:blank"
        var title: String
        var status: Int
        var detail: String
        var code: String
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 409: "Conflict"
        case 410: "Gone"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 417: "Expectation Failed"
        case 422: "Unprocessable Content"
        case 429: "Too Many Requests"
        case 503: "Service Unavailable"
        default: "Internal Server Error"
        }
    }
}

extension ProviderAPIProblem {
    /// What the HTTP server answers itself, as problem documents: a request evhttp cannot
    /// read (400), a body over the limit (413), an `Expect` other than 100-continue (417),
    /// a connection over the cap (503).
    static let errorPages = HTTPErrorPages(contentType: "application/problem+json") { status, _, detail in
        let problem = switch status {
        case 413: ProviderAPIProblem(413, Status.tooLarge.name, detail ?? "the request body is over the size limit")
        case 417: ProviderAPIProblem(417, Status.badRequest.name, detail ?? "the only expectation served is 100-continue")
        case 503: ProviderAPIProblem(503, Status.busy.name, "too many open connections, retry later")
        default: ProviderAPIProblem(status, Status.badRequest.name,
                                    detail ?? "not an HTTP/1.x request this server can read, or its head is over the size limit")
        }
        return problem.body
    }
}

/// The JSON coders of the provider API: snake_case keys as written in the types, ISO 8601
/// times with milliseconds.
enum ProviderAPIJSON {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    static func time(_ unixMs: UInt64) -> String { UTCTime.iso8601(milliseconds: unixMs, fractional: true) }
}
