import PushSecurity
import PushSession
import PushWire

/// Per-connection state the store keeps beyond the shared lifecycle.
public final class StoreSession {
    public let peerAddress: String
    public internal(set) var role: PeerRole
    /// The connection's frame size once HELLO_OK settled it: a REGISTRY_OK must fit.
    public package(set) var maxFrame = FrameLimits.defaultMaxFrame
    /// The provider its requests speak for: the sender recorded with what it stores, the
    /// owner of its SEND keys ([4.17-7]), and what its STATUS and RECALL may see ([4.12-3]).
    /// Every holder of the provider key is one provider; each provider of the HTTP API's
    /// tokens is another (`ProviderIdentity`).
    public let provider: ProviderIdentity
    // The last token that verified, so a device's stream of FETCHes pays for one HMAC.
    var verifiedToken: [UInt8] = []
    var verifiedClaims: FetchToken?
    /// LOGINs whose password is being checked off the loop, by their exact content.
    private var pendingLogins: [PendingLoginKey: PendingLogin] = [:]

    private struct PendingLoginKey: Hashable {
        var user: ExactName
        var password: [UInt8]
        var deviceID: ExactName

        init(_ login: Login) {
            user = ExactName(login.user)
            password = login.password
            deviceID = ExactName(login.deviceID)
        }
    }

    /// Which identity the password of a LOGIN was checked against. `finishLogin` is told
    /// only whether a password matched, not which hash it was checked against; while every
    /// identical LOGIN in flight was checked against the same identity, that is enough.
    struct PendingLogin {
        var userID: UInt64?
        var count: Int
        /// The login limits were read from the database that every store shares.
        var sharedLimits: Bool
        /// Identical LOGINs in flight were checked against different identities (the name
        /// was removed and added again meanwhile): none of them may be trusted.
        var mixed: Bool
    }

    public init(peerAddress: String, role: PeerRole, provider: ProviderIdentity = .keyHolders) {
        self.peerAddress = peerAddress
        self.role = role
        self.provider = provider
    }

    func startLogin(_ login: Login, userID: UInt64?, sharedLimits: Bool) {
        let key = PendingLoginKey(login)
        var pending = pendingLogins[key] ?? PendingLogin(userID: userID, count: 0, sharedLimits: sharedLimits, mixed: false)
        pending.count += 1
        if pending.userID != userID { pending.mixed = true }
        pendingLogins[key] = pending
    }

    func finishLogin(_ login: Login) -> PendingLogin? {
        let key = PendingLoginKey(login)
        guard var pending = pendingLogins[key] else { return nil }
        pending.count -= 1
        pendingLogins[key] = pending.count > 0 ? pending : nil
        return pending
    }
}
