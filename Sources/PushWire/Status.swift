/// Status codes of protocol v1 (SPEC.md section 6). A struct rather than an enum so a
/// code this build does not know still round-trips and prints.
public struct Status: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let ok = Status(rawValue: 0x0000)
    public static let malformedFrame = Status(rawValue: 0x0001)
    public static let unsupportedVersion = Status(rawValue: 0x0002)
    public static let frameTooLarge = Status(rawValue: 0x0003)
    public static let helloRequired = Status(rawValue: 0x0004)
    public static let unknownType = Status(rawValue: 0x0005)
    public static let badRequest = Status(rawValue: 0x0006)
    public static let timeout = Status(rawValue: 0x0007)
    public static let authRequired = Status(rawValue: 0x0010)
    public static let tokenExpired = Status(rawValue: 0x0011)
    public static let badToken = Status(rawValue: 0x0012)
    public static let badCredentials = Status(rawValue: 0x0013)
    public static let forbidden = Status(rawValue: 0x0014)
    public static let notFound = Status(rawValue: 0x0015)
    public static let gone = Status(rawValue: 0x0016)
    public static let unknownUser = Status(rawValue: 0x0017)
    public static let tooLarge = Status(rawValue: 0x0018)
    public static let rateLimited = Status(rawValue: 0x0019)
    public static let busy = Status(rawValue: 0x001A)
    public static let shuttingDown = Status(rawValue: 0x001B)
    public static let replaced = Status(rawValue: 0x001C)
    public static let slowConsumer = Status(rawValue: 0x001D)
    /// The device's registration was revoked ([7.4-6]).
    public static let revoked = Status(rawValue: 0x001E)
    /// An idempotency key reused for a different SEND ([4.17-5]).
    public static let conflict = Status(rawValue: 0x001F)
    /// A FETCH of a sealed payload that holds no stanza for the device's current key ([4.19-4]).
    public static let notSealedForDevice = Status(rawValue: 0x0020)
    /// A STORE or SEND the store was to seal, when no device of its audience has a key ([4.19-6]).
    public static let noDeviceKeys = Status(rawValue: 0x0021)
    public static let internalError = Status(rawValue: 0x00FF)

    public static let all: [Status] = [
        .ok, .malformedFrame, .unsupportedVersion, .frameTooLarge, .helloRequired, .unknownType,
        .badRequest, .timeout, .authRequired, .tokenExpired, .badToken, .badCredentials, .forbidden,
        .notFound, .gone, .unknownUser, .tooLarge, .rateLimited, .busy, .shuttingDown, .replaced,
        .slowConsumer, .revoked, .conflict, .notSealedForDevice, .noDeviceKeys, .internalError,
    ]

    /// The name the spec and the vector files use.
    public var name: String {
        switch self {
        case .ok: "OK"
        case .malformedFrame: "MALFORMED_FRAME"
        case .unsupportedVersion: "UNSUPPORTED_VERSION"
        case .frameTooLarge: "FRAME_TOO_LARGE"
        case .helloRequired: "HELLO_REQUIRED"
        case .unknownType: "UNKNOWN_TYPE"
        case .badRequest: "BAD_REQUEST"
        case .timeout: "TIMEOUT"
        case .authRequired: "AUTH_REQUIRED"
        case .tokenExpired: "TOKEN_EXPIRED"
        case .badToken: "BAD_TOKEN"
        case .badCredentials: "BAD_CREDENTIALS"
        case .forbidden: "FORBIDDEN"
        case .notFound: "NOT_FOUND"
        case .gone: "GONE"
        case .unknownUser: "UNKNOWN_USER"
        case .tooLarge: "TOO_LARGE"
        case .rateLimited: "RATE_LIMITED"
        case .busy: "BUSY"
        case .shuttingDown: "SHUTTING_DOWN"
        case .replaced: "REPLACED"
        case .slowConsumer: "SLOW_CONSUMER"
        case .revoked: "REVOKED"
        case .conflict: "CONFLICT"
        case .notSealedForDevice: "NOT_SEALED_FOR_DEVICE"
        case .noDeviceKeys: "NO_DEVICE_KEYS"
        case .internalError: "INTERNAL"
        default: "STATUS_0x" + String(rawValue, radix: 16)
        }
    }

    public var description: String { name }

    public init?(name: String) {
        guard let found = Status.all.first(where: { $0.name == name }) else { return nil }
        self = found
    }

    /// Fatal statuses end the connection (GOAWAY, then close) ([6-2]).
    public var isFatal: Bool {
        switch self {
        case .malformedFrame, .unsupportedVersion, .frameTooLarge, .helloRequired, .timeout,
             .shuttingDown, .replaced, .slowConsumer, .revoked:
            true
        default:
            false
        }
    }
}
