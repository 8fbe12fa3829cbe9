import PushSecurity
import PushSession
import PushWire

/// How to answer a request once its write is durable.
public enum CommittedReply: Sendable, Equatable {
    case storeOK(StoreOK)
    /// SEND_OK, and the push to hand to a gateway once it is sent; `createdAt` is the
    /// payload's (unix ms), from which the forward latency counts. `idempotency`: the key
    /// held in flight until the commit's outcome ([4.17-6]).
    case sendOK(SendOK, Push, createdAt: UInt64, idempotency: IdempotencyKey?)
    case ackOK(PayloadID)
    case recallOK(PayloadID)
    /// LOGIN_OK once the device key it registers is durable ([4.6-5]).
    case loginOK(LoginOK)

    /// The new payload's creation time (unix ms), when the reply is SEND_OK's.
    public var createdAt: UInt64? {
        if case .sendOK(_, _, let createdAt, _) = self { createdAt } else { nil }
    }

    public func message(for outcome: WriteOutcome) -> Message {
        switch (outcome, self) {
        case (.failed(.badCredentials), .loginOK):
            // The registration was revoked as its key was being committed: as 4.6-4 answers.
            return .error(ErrorReply(status: .badCredentials, message: "unknown user or wrong password"))
        case (.failed(let status), _): return .error(ErrorReply(status: status))
        case (.stored(_, let cursor?), .storeOK(var reply)):
            reply.cursor = cursor
            return .storeOK(reply)
        case (_, .storeOK(let reply)): return .storeOK(reply)
        case (.stored(_, let cursor?), .sendOK(var reply, _, _, _)):
            reply.cursor = cursor
            return .sendOK(reply)
        case (_, .sendOK(let reply, _, _, _)): return .sendOK(reply)
        case (_, .ackOK(let id)): return .ackOK(AckOK(id: id))
        case (_, .recallOK(let id)): return .recallOK(RecallOK(id: id))
        case (_, .loginOK(let reply)): return .loginOK(reply)
        }
    }
}

/// What the I/O layer is to do with a request: the store's logic never touches a socket
/// or a database.
public enum StoreAction {
    case reply(Message)
    /// SEND_OK replaying an earlier SEND's answer ([4.17-5]), with that SEND's creation
    /// time (unix ms), which the HTTP API's answer repeats.
    case replay(SendOK, createdAt: UInt64)
    /// Commit durably, then reply.
    case commit(WriteOperation, CommittedReply)
    /// Read what the request needs, then hand the result to `StoreLogic.resume`.
    case read(StoreReads, PendingRequest)
    /// Check a password off the loop (a slow hash), then call `passwordChecked`.
    case verifyPassword(Login, storedHash: String?)
    /// A LOGIN is decided.
    case loginDecided(LoginResult)
    /// Nothing follows the REGISTRY's cursor: hold it until the registry changes or its
    /// wait is over ([4.16-8]).
    case hold(RegistryRequest)
}

/// A request waiting for its reads, with what its checks have established so far.
public enum PendingRequest: Sendable {
    case login(Login)
    /// The password matched; the identity and the registration are asked afresh.
    case confirmLogin(Login)
    case fetch(Fetch, FetchToken)
    case sync(Sync, FetchToken)
    case ack(Ack, FetchToken)
    case recall(Recall)
    case status(StatusRequest)
    case registry(RegistryRequest)
    /// KEYS once the user's keys are read ([4.18]).
    case keys(Keys)
    /// A SEND once its idempotency key's earlier use ([4.17-5]) or, for a tag target, the
    /// recipient's enrolled devices ([4.9-4]) are read.
    case send(SendRequest, IdempotencyKey?)
}

/// What `StoreLogic.finishLogin` decided.
public struct LoginResult: Sendable, Equatable {
    public var reply: Message
    /// Why the LOGIN was refused, for the operator's log; nil when it succeeded.
    public var refusal: LoginRefusal?
    /// The outcome to count in login limits the database keeps for every store, decided
    /// by the rule; nil when the store keeps them in its own memory.
    public var sharedAttempt: LoginLimitChange?
    /// The device key to commit before `reply` (LOGIN_OK) is sent ([4.6-5]); nil when the
    /// LOGIN carried none, or the key its registration has already.
    public var keyChange: DeviceKeyChange?
}

/// Why a LOGIN got BAD_CREDENTIALS; the peer is never told which ([4.6-2], [4.6-4]).
public enum LoginRefusal: String, Sendable {
    case wrongPassword = "unknown user or wrong password"
    /// The name was removed, or given to someone else, while the password was checked.
    case userChanged = "user removed during login"
    /// The password was right, but the registry holds no enrolled, unexpired
    /// registration of that device id for that user.
    case deviceNotEnrolled = "device not enrolled"
}

/// Why a genuinely issued, unexpired token got BAD_TOKEN ([7.3-3]).
public enum TokenRevocation: String, Sendable, CaseIterable {
    /// Its user was removed, or the name now belongs to a user added after the token.
    case userRemoved = "user removed"
    /// Its device's registration was revoked, expired, or replaced by a later enrolment.
    case deviceNotEnrolled = "device not enrolled"
}
