import PushSealing
import PushWire

/// The rules of a device's LOGIN that `DeviceClient` and `securepush device login` share:
/// every LOGIN carries the device's public key (SPEC.md 4.6-5), and a LOGIN_OK that names
/// another key than the device's own fails the login (4.6-8).
public enum DeviceLogin {
    /// The smallest `max_frame` a device with a key of `suite` proposes in HELLO: a suite-2
    /// LOGIN is up to 1629 bytes, over the smallest frame a connection may agree (5.2-4).
    public static func minimumMaxFrame(for suite: KeySuite?) -> UInt32? {
        suite == .xwing ? 4096 : nil
    }

    /// A device's HELLO to the store. `proposed`: a `max_frame` the caller wants; one below
    /// what the key's LOGIN needs is raised to it, and nil proposes none (the server's default).
    public static func hello(keySuite: KeySuite?, proposed: UInt32? = nil) -> Hello {
        var maxFrame = proposed
        if let proposed, let needed = minimumMaxFrame(for: keySuite), proposed < needed { maxFrame = needed }
        return Hello(role: .device, maxFrame: maxFrame, name: "securepush-device")
    }

    public static func request(user: String, password: [UInt8], deviceID: String, key: DeviceKeyPair?) -> Login {
        Login(user: user, password: password, deviceID: deviceID,
              deviceKey: key.map { DevicePublicKey(suite: $0.suite, bytes: $0.publicKey) })
    }

    /// Whether the store registered the key the device sent. A LOGIN_OK without `key_id` comes
    /// from a store of an earlier revision (it skipped the key's fields, 3.4-2): the login
    /// stands, and the caller may say that sealed payloads cannot reach this device.
    public enum KeyRegistration: Equatable, Sendable {
        case registered(KeyID)
        case notSent
        case storeDoesNotSeal
    }

    /// Checks LOGIN_OK's `key_id` against the device's own key (4.6-8).
    public static func check(_ ok: LoginOK, deviceID: String, key: DeviceKeyPair?) throws(ClientError) -> KeyRegistration {
        guard let key else { return .notSent }
        let own = key.keyID(deviceID: deviceID)
        guard let registered = ok.keyID else { return .storeDoesNotSeal }
        guard registered == own else { throw .keyIDMismatch(sent: own, registered: registered) }
        return .registered(own)
    }
}
