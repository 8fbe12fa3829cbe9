import FoundationEssentials
import PushClock
import PushWire

/// An error answer of the HTTP provider API: an RFC 9457 problem document
/// (`application/problem+json`) whose `code` is the protocol status name the same
/// failure has on the binary protocol (SPEC.md section 6).
public struct ProviderAPIProblem: Error, Equatable, Sendable {
    public var httpStatus: Int
    public var code: String
    public var detail: String
    public var headers: [(String, String)] = []

    public static func == (lhs: ProviderAPIProblem, rhs: ProviderAPIProblem) -> Bool {
        lhs.httpStatus == rhs.httpStatus && lhs.code == rhs.code && lhs.detail == rhs.detail
    }

    public init(_ httpStatus: Int, _ code: String, _ detail: String, headers: [(String, String)] = []) {
        self.httpStatus = httpStatus
        self.code = code
        self.detail = detail
        self.headers = headers
    }

    /// The answer to a protocol ERROR. Every 503 means "nothing was decided: retry after
    /// Retry-After". A keyed SEND's BUSY, its key's first request still being committed
    /// ([4.17-6]), is one too: a 409 (what draft-ietf-httpapi-idempotency-key-header
    /// suggests) is final to clients and to retry libraries, which would then give up on a
    /// message whose outcome is not known yet, or send it again under a new key.
    public init(_ error: ErrorReply) {
        let detail = error.message ?? error.status.name
        let retry = [("Retry-After", "1")]
        switch error.status {
        case .badRequest, .unknownUser, .noDeviceKeys: self.init(422, error.status.name, detail)
        case .authRequired, .badToken, .tokenExpired, .badCredentials, .revoked:
            self.init(401, error.status.name, detail, headers: [("WWW-Authenticate", "Bearer")])
        case .forbidden: self.init(403, error.status.name, detail)
        case .notFound: self.init(404, error.status.name, detail)
        case .gone: self.init(410, error.status.name, detail)
        case .conflict: self.init(409, error.status.name, detail)
        case .tooLarge, .frameTooLarge: self.init(413, error.status.name, detail)
        case .rateLimited: self.init(429, error.status.name, detail, headers: retry)
        case .busy, .shuttingDown, .internalError, .timeout, .slowConsumer:
            // INTERNAL is a commit that failed (the database is unreachable, say): the
            // request left nothing behind and may be retried.
            self.init(503, error.status.name, detail, headers: retry)
        default: self.init(500, error.status.name, detail)
        }
    }

    /// The problem document.
    public var body: [UInt8] {
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

    public static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 304: "Not Modified"
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

/// The JSON coders of the provider API: snake_case keys as written in the types, ISO 8601
/// times with milliseconds.
public enum ProviderAPIJSON {
    public static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    public static func time(_ unixMs: UInt64) -> String { UTCTime.iso8601(milliseconds: unixMs, fractional: true) }
}
