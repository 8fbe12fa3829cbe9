import ArgumentParser
import PushClient
import PushEventLoop
import PushSealing
import PushSecurity
import PushWire
#if canImport(Glibc)
import Glibc
#endif

/// Where a terminal device keeps its fetch token, like an app's local storage.
struct StateDirectoryOption: ParsableArguments {
    @Option(help: ArgumentHelp("The device's state directory, created if missing (default: ~/.securepush/device).",
                               valueName: "directory"))
    var stateDir: String?

    var directory: String {
        stateDir ?? ((getenv("HOME").map { String(cString: $0) } ?? ".") + "/.securepush/device")
    }
}

extension DeviceCommand {
    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A device in a terminal: prints each notification as it is shown, until interrupted.")

        @Option(help: ArgumentHelp("The gateway's address: a host name or an IP address, and the port (IPv6 in brackets: [::1]:7071). \(gatewayListHelp) The device SYNCs with the store after each gateway it reaches, so a move loses nothing.",
                                   valueName: "host:port"), transform: parseGatewayAddresses)
        var gateway: AddressList
        @Option(help: ArgumentHelp("The store's address: a host name or an IP address, and the port. \(addressListHelp) The device SYNCs with each store it reaches and shows every notification once.",
                                   valueName: "host:port"), transform: parseStoreAddresses)
        var store: AddressList
        @Option(help: ArgumentHelp("The registration file from `securepush device enroll`.", valueName: "file")) var credential: String
        @OptionGroup var state: StateDirectoryOption
        @Option(help: ArgumentHelp("CA certificate (PEM) to verify TLS servers with; without it the connections are plain TCP.",
                                   valueName: "file"))
        var caFile: String?
        @Option(help: ArgumentHelp("What stdout says of each notification shown, one line each: human (the local time, the id and the text) or machine (`SHOWN ID PAYLOAD HEX` with the content's bytes in hex, or `SHOWN ID GENERIC`, and nothing else).",
                                   valueName: "format"))
        var output: DeviceOutputFormat = .human

        func run() throws {
            let registration = try readCredentialFile(credential)
            guard let claims = Registration.readUnverified(registration) else {
                throw CommandFailure("\(credential) is not a registration credential")
            }
            let tokens = TokenStore(directory: state.directory)
            try prepareStateDirectory(deviceID: claims.deviceID)
            let loop = try EventLoop()
            let device = DeviceClient(loop: loop, gateway: try endpoint(gateway, caFile: caFile), store: try endpoint(store, caFile: caFile),
                                      registration: registration, deviceID: claims.deviceID, tokenStore: tokens,
                                      shownFile: ShownIDFile(directory: state.directory),
                                      keyFile: DeviceKeyFile(directory: state.directory),
                                      genericFile: ShownIDFile(directory: state.directory, name: ShownIDFile.genericFileName))
            device.onNotification = { [output] notification in announce(output.line(for: notification)) }
            var states = ConnectionStateLines()
            var failure: PermanentFailure?
            device.onEvent = { event in
                switch event {
                case .gatewayConnected:
                    // With several gateways, which one: the line also says the device moved.
                    let which = gateway.count > 1 ? " at \(device.gatewayAddress)" : ""
                    states.report("gateway", "connected to the gateway\(which) as \(claims.deviceID)")
                case .storeConnected:
                    // Said only when it comes back: the gateway's line says the device is up.
                    // With several stores, also said when the device moved to another one.
                    states.report("store", "connected to the store at \(device.storeAddress)", quietly: !states.hasReported("store"))
                case .disconnected(let service, let error):
                    // The address that failed; the device moves on to the next of a list.
                    let address = service == "gateway" ? device.gatewayAddress : device.storeAddress
                    states.report(service, "\(describe(error, talkingTo: service, at: address, tls: caFile != nil)); retrying")
                case .stopped(let permanent):
                    failure = permanent
                    loop.stop()
                default:
                    if let line = Self.standardErrorLine(for: event) { writeStandardError(line + "\n") }
                }
            }
            device.start()
            let stop = { loop.stop() }
            let signals = [loop.onSignal(SIGTERM, stop), loop.onSignal(SIGINT, stop)]
            unblockTerminationSignals()
            // A start that fails at once (an unresolvable name) stops the device before the loop runs.
            if failure == nil { loop.run() }
            signals.forEach { $0.cancel() }
            device.stop()
            loop.shutdown()
            if let failure { throw CommandFailure(explain(failure)) }
        }

        /// What the device says on stderr of an event, beside the notifications on stdout
        /// (one a line), or nil for one it says nothing of.
        static func standardErrorLine(for event: DeviceEvent) -> String? {
            switch event {
            case .shownNotSaved(let failure):
                return "\(failure): after a restart this notification may be shown again"
            case .tokenRejected(let status):
                return "fetch token refused (\(status)): run `securepush device login`"
            case .loggedIn(let expiresAt):
                return "logged in (token valid until \(localTime(milliseconds: expiresAt))); fetching kept notifications"
            case .sealedNotOpened(let id, let reason):
                // Beside the generic prompt on stdout: why this one shows no content.
                let why = reason.map { "it does not open with this device's key (\($0))" }
                    ?? "it was sealed before this device's current key was registered"
                return "\(id.hex): sealed payload not readable here, \(why)"
            case .deviceKeyUnusable(let failure):
                return "\(failure); sealed payloads show the generic notification"
            case .olderNotListed(let count):
                return "\(count) older unread notification\(count == 1 ? "" : "s") not shown (the newest are)"
            default:
                return nil
            }
        }

        /// Makes the state directory and records in it which device this is.
        private func prepareStateDirectory(deviceID: String) throws {
            do {
                try Deployment.makeDirectories(state.directory)
                try Deployment.writePrivate(state.directory + "/device-id", deviceID + "\n")
            } catch {
                throw CommandFailure("cannot use the state directory \(state.directory): \(error)")
            }
        }

        /// The one line `device run` exits with.
        private func explain(_ failure: PermanentFailure) -> String {
            switch failure.error {
            case .refused(let status, let text) where failure.service == "gateway"
                && (status == .badCredentials || status == .forbidden || status == .authRequired):
                "the gateway at \(failure.address) refused the registration in \(credential): \(status)"
                    + (text.map { " (\($0))" } ?? "") + "; enroll the device again with `securepush device enroll`"
            case .goaway(.revoked, _):
                "the registration in \(credential) was revoked (the gateway at \(failure.address) closed the connection); "
                    + "enroll the device again with `securepush device enroll`"
            case .goaway(.replaced, _):
                "the gateway at \(failure.address) closed the connection: replaced by another connection with the same device id "
                    + "(is another `device run` using \(credential)?)"
            default:
                describe(failure.error, talkingTo: failure.service, at: failure.address, tls: caFile != nil).description
            }
        }
    }

    struct Login: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Log in: the password is read from stdin or a prompt; the fetch token goes to the state directory.")

        @Option(help: ArgumentHelp("The store's address: a host name or an IP address, and the port. \(addressListHelp)",
                                   valueName: "host:port"), transform: parseStoreAddresses)
        var store: AddressList
        @Option(help: "The user name.") var user: String
        @Option(help: ArgumentHelp("The device id (default: the one `device run` recorded in the state directory).", valueName: "id"))
        var device: String?
        @OptionGroup var state: StateDirectoryOption
        @Option(help: ArgumentHelp("CA certificate (PEM) to verify TLS servers with; without it the connection is plain TCP.",
                                   valueName: "file"))
        var caFile: String?
        @Option(help: ArgumentHelp("How long to wait for the store, in seconds (fractions allowed).", valueName: "seconds"))
        var timeout = Seconds(30)
        @Option(help: ArgumentHelp("The suite of a device key this login makes (when the state directory has none, or with --new-key); xwing is the post-quantum hybrid, with larger keys and sealed payloads (default: x25519).",
                                   valueName: "suite"))
        var keySuite: KeySuite?
        @Flag(help: "Make a new device key and register it in place of the old one: payloads sealed to the old key can no longer be read here.")
        var newKey = false

        func validate() throws {
            try checkIdentifier(user, as: .user, "--user")
            if let device { try checkIdentifier(device, as: .deviceID, "--device") }
        }

        func run() throws {
            let deviceID = try device ?? {
                guard let recorded = try? Deployment.readFile(state.directory + "/device-id"),
                      !recorded.trimmingWhitespaceAndNewlines.isEmpty else {
                    throw CommandFailure("no device id: pass --device or run `securepush device run` once with this --state-dir")
                }
                return recorded.trimmingWhitespaceAndNewlines
            }()
            let keyFile = DeviceKeyFile(directory: state.directory)
            let (key, made) = try deviceKey(keyFile)
            let password = try readPassword(prompt: "password for \(user): ")
            let storeEndpoint = try endpoint(store, caFile: caFile)
            let tokens = TokenStore(directory: state.directory)
            let login: LoginOK = try runUntilDone(timeoutSeconds: timeout.value, what: "the store") { loop, done in
                let link = ServerLink(loop: loop, endpoint: storeEndpoint) { DeviceLogin.hello(keySuite: key.suite) }
                link.timeouts.handshakeMs = helloTimeoutMs(commandTimeoutSeconds: timeout.value)
                // A store that cannot be reached is passed over for the next of the list; the
                // command fails once every one has failed, or at once for a refusal for good.
                link.onDown = { [weak link] error in
                    guard let link, error.isPermanent else { return }
                    done(.failure(describe(error, talkingTo: "store", at: link.currentAddress, tls: caFile != nil)))
                }
                link.onEveryAddressFailed = { failures in done(.failure(describe(failures, talkingTo: "store", tls: caFile != nil))) }
                link.start()
                link.request(.login(DeviceLogin.request(user: user, password: password, deviceID: deviceID, key: key))) { result in
                    link.stop()
                    switch result {
                    case .success(.loginOK(let ok)): done(.success(ok))
                    case .failure(.status(.badCredentials, _)): done(.failure(CommandFailure("wrong user name or password")))
                    case .failure(.status(.rateLimited, _)): done(.failure(CommandFailure("too many failed logins; wait a minute")))
                    case .failure(let error): done(.failure(describe(error, talkingTo: "store", at: link.currentAddress, tls: caFile != nil)))
                    case .success(let other): done(.failure(CommandFailure("unexpected reply \(other.type)")))
                    }
                }
            }
            let registration: DeviceLogin.KeyRegistration
            do {
                registration = try DeviceLogin.check(login, deviceID: deviceID, key: key)
            } catch {
                // [4.6-8]: the token is not kept, and a key made for this login is not either.
                throw CommandFailure("login refused: \(error)")
            }
            if made {
                // Saved only once the store has registered it: a failed login keeps the old key,
                // which payloads already sealed to it still need.
                do { try keyFile.save(key) } catch { throw CommandFailure("\(error); the store registered a key this device does not keep: log in again with --new-key") }
            }
            do {
                try tokens.save(TokenStore.Saved(token: login.token, expiresAt: login.expiresAt))
            } catch {
                throw CommandFailure("cannot save the token in \(state.directory): \(error)")
            }
            announce("logged in as \(user) on \(deviceID); token valid until \(localTime(milliseconds: login.expiresAt))")
            switch registration {
            case .registered(let keyID):
                announce("device key \(keyID) (\(key.suite)\(made ? ", new" : "")) registered: payloads sealed to it can be read here")
            case .storeDoesNotSeal, .notSent:
                writeStandardError("the store did not register the device key (a store before protocol revision 1.5): sealed payloads cannot reach this device\n")
            }
        }

        /// The key this login registers: the one in the state directory, or a new one (not
        /// saved until the store has registered it).
        private func deviceKey(_ file: DeviceKeyFile) throws -> (key: DeviceKeyPair, made: Bool) {
            do {
                return try file.keyForLogin(suite: keySuite, replace: newKey)
            } catch {
                throw CommandFailure("\(error)")
            }
        }
    }

    struct Logout: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Forget the fetch token.")
        @OptionGroup var state: StateDirectoryOption

        func run() throws {
            announce(TokenStore(directory: state.directory).remove() ? "logged out" : "was not logged in")
        }
    }
}

/// How `device run` writes a notification on stdout (`announce` flushes each line).
enum DeviceOutputFormat: String, ExpressibleByArgument, CaseIterable {
    /// `TIME ID TEXT`, for a person.
    case human
    /// `SHOWN ID PAYLOAD HEX` or `SHOWN ID GENERIC` (Appendix B.2), for a harness or a script.
    case machine

    func line(for notification: DeviceNotification) -> String {
        switch self {
        case .human:
            return "\(localTimeNow()) \(notification.id.hex) \(notification.text)"
        case .machine:
            switch notification.content {
            // Empty content: nothing after PAYLOAD, not even a space.
            case .payload(let bytes): return "SHOWN \(notification.id.hex) PAYLOAD" + (bytes.isEmpty ? "" : " " + bytes.hexString)
            case .generic: return "SHOWN \(notification.id.hex) GENERIC"
            }
        }
    }
}

/// What `device run` says about its connections: one line when a service's state
/// changes (connected, or down for a new reason), not one per reconnect attempt.
extension KeySuite: ExpressibleByArgument {
    public init?(argument: String) { self.init(name: argument) }
    public static var allValueStrings: [String] { allCases.map(\.description) }
}

struct ConnectionStateLines {
    private var last: [String: String] = [:]

    /// Prints `line` unless it is the service's current state; `quietly` records it only.
    mutating func report(_ service: String, _ line: String, quietly: Bool = false) {
        guard last[service] != line else { return }
        last[service] = line
        if !quietly { writeStandardError(line + "\n") }
    }

    func hasReported(_ service: String) -> Bool { last[service] != nil }
}

extension String {
    var trimmingWhitespaceAndNewlines: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
