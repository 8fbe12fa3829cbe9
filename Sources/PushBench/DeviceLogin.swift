import PushWire

/// LOGIN once per device at setup (the device's fetch token, as an app gets it when
/// its user signs in).
final class LoginCollector: LinkOwner {
    private(set) var tokens: [[UInt8]]
    private var answered = 0
    private var failures: [String: Int] = [:]

    init(count: Int) { tokens = Array(repeating: [], count: count) }

    func run(_ links: [BenchLink], user: String, password: String, session: BenchSession) throws(BenchError) {
        for link in links {
            link.connection?.write(Message.login(Login(user: user, password: Array(password.utf8), deviceID: link.device)).encoded(correlation: 2))
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
