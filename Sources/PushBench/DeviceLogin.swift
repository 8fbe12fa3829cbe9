import PushWire

/// LOGIN once per device at setup (the device's fetch token, as an app gets it when
/// its user signs in).
final class LoginCollector: LinkOwner {
    private(set) var tokens: [[UInt8]]
    private var answered = 0
    private var failures: [String: Int] = [:]

    init(count: Int) { tokens = Array(repeating: [], count: count) }

    /// Key ids LOGIN_OK must name, by device, when `keys` registers a key per device.
    private var keyIDs: [KeyID]?

    /// - Parameter keys: a public key for each link's device to register, and its id.
    func run(_ links: [BenchLink], user: String, password: String, session: BenchSession,
             keys: [(DevicePublicKey, KeyID)]? = nil) throws(BenchError) {
        keyIDs = keys?.map(\.1)
        for link in links {
            let login = Login(user: user, password: Array(password.utf8), deviceID: link.device, deviceKey: keys?[link.index].0)
            link.connection?.write(Message.login(login).encoded(correlation: 2))
        }
        session.progress.status = { [unowned self] in "logging in devices: \(answered)/\(tokens.count)" }
        try session.driver.drive(phase: "device logins", timeoutSeconds: 60 + Double(links.count) / 50) { answered == links.count }
        if !failures.isEmpty {
            throw .setup("device LOGIN failed: " + failures.map { "\($0.key) (\($0.value)x)" }.joined(separator: ", "))
        }
    }

    func frame(on link: BenchLink, header: FrameHeader, body: UnsafeRawBufferPointer) {
        guard header.correlation == 2 else { return }
        answered += 1
        if header.rawType == MessageType.loginOK.rawValue, let token = FieldScan.value(of: FieldTag.token.rawValue, in: body) {
            if let keyIDs, FieldScan.value(of: FieldTag.keyID.rawValue, in: body).flatMap(KeyID.init(bytes:)) != keyIDs[link.index] {
                failures["LOGIN_OK without the registered key id", default: 0] += 1
                return
            }
            tokens[link.index] = Array(token)
        } else {
            failures[header.rawType == MessageType.error.rawValue ? header.status.name : "unexpected reply", default: 0] += 1
        }
    }

    func linkLost(_ link: BenchLink) {
        answered += 1
        failures["connection lost: \(link.failure ?? "closed")", default: 0] += 1
    }
}
