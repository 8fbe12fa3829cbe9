import PushSecurity

/// Why an enrolment was not recorded.
public enum EnrolmentError: Error, CustomStringConvertible, Sendable {
    /// The store has no user by that name.
    case unknownUser(String)
    /// A device id, user name or tag outside what a registration may carry.
    case invalid(String)
    /// The signed registration would not fit in a HELLO read before HELLO_OK ([7.4-3]).
    case tooLarge(bytes: Int)
    /// The credential could not be handed over (its file not written): nothing was recorded.
    case notDelivered(String)
    /// The database failed (its own message).
    case storage(any Error & Sendable)

    public var description: String {
        switch self {
        case .unknownUser(let name): "no user \(name)"
        case .invalid(let text): text
        case .tooLarge(let bytes):
            "the registration is \(bytes) bytes; at most \(Registration.maxSignedBytes) fit in the HELLO a server reads before HELLO_OK: use fewer tags"
        case .notDelivered(let text): text
        case .storage(let error): "\(error)"
        }
    }
}

/// A device to enroll for a user.
public struct EnrolmentRequest: Sendable, Equatable {
    public var user: String
    public var deviceID: String
    public var tags: [String]

    public init(user: String, deviceID: String, tags: [String] = []) {
        self.user = user
        self.deviceID = deviceID
        self.tags = tags
    }
}

/// A recorded enrolment, and the registration of the same device id it revoked.
public struct Enrolment: Sendable, Equatable {
    public var registration: RegistrationRecord
    public var replaced: RegistrationRecord?
}
