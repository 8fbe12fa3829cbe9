import ArgumentParser
import PushClient
import PushEventLoop
import PushSecurity
import PushWire
#if canImport(Glibc)
import Glibc
#endif

/// Where a terminal device keeps its fetch token, like an app's local storage.
struct StateDirectoryOption: ParsableArguments {
    @Option(help: "The device's state directory (default: ~/.securepush/device).") var stateDir: String?

    var directory: String {
        stateDir ?? ((getenv("HOME").map { String(cString: $0) } ?? ".") + "/.securepush/device")
    }
}

extension DeviceCommand {
    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A device in a terminal: prints each notification as it is shown, until interrupted.")

        @Option(help: "The gateway's address.") var gateway: HostPort
        @Option(help: "The store's address.") var store: HostPort
        @Option(help: "The registration file from `securepush device enroll`.") var credential: String
        @OptionGroup var state: StateDirectoryOption
        @Option(help: "CA certificate to verify TLS servers with.") var caFile: String?

        func run() throws {
            let registration = try readCredentialFile(credential)
            guard let claims = Registration.readUnverified(registration) else {
                throw CommandFailure("\(credential) is not a registration credential")
            }
            let tokens = TokenStore(directory: state.directory)
            do {
                try Deployment.makeDirectories(state.directory)
                try Deployment.writePrivate(state.directory + "/device-id", claims.deviceID + "\n")
            } catch {
                throw CommandFailure("cannot use the state directory \(state.directory): \(error)")
            }
            let loop = try EventLoop()
            let device = DeviceClient(loop: loop, gateway: try endpoint(gateway, caFile: caFile), store: try endpoint(store, caFile: caFile),
                                      registration: registration, deviceID: claims.deviceID, tokenStore: tokens)
            device.onNotification = { notification in
                announce("\(clockTime()) \(notification.id.hex) \(notification.text)")
            }
            device.onEvent = { event in
                switch event {
                case .gatewayConnected: writeStandardError("connected to the gateway as \(claims.deviceID)\n")
                case .tokenRejected(let status): writeStandardError("fetch token refused (\(status)): run `securepush device login`\n")
                case .disconnected(let service, let error): writeStandardError("\(service) connection lost: \(error); retrying\n")
                case .loggedIn: writeStandardError("logged in; fetching kept notifications\n")
                default: break
                }
            }
            device.start()
            let stop = { loop.stop() }
            let signals = [loop.onSignal(SIGTERM, stop), loop.onSignal(SIGINT, stop)]
            unblockTerminationSignals()
            loop.run()
            signals.forEach { $0.cancel() }
            device.stop()
            loop.shutdown()
        }
    }

    struct Login: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Log in: the password is read from stdin or a prompt; the fetch token goes to the state directory.")

        @Option(help: "The store's address.") var store: HostPort
        @Option(help: "The user name.") var user: String
        @Option(help: "The device id (default: the one `device run` recorded in the state directory).") var device: String?
        @OptionGroup var state: StateDirectoryOption
        @Option(help: "CA certificate to verify TLS servers with.") var caFile: String?

        func run() throws {
            let deviceID = try device ?? {
                guard let recorded = try? Deployment.readFile(state.directory + "/device-id"),
                      !recorded.trimmingWhitespaceAndNewlines.isEmpty else {
                    throw CommandFailure("no device id: pass --device or run `securepush device run` once with this --state-dir")
                }
                return recorded.trimmingWhitespaceAndNewlines
            }()
            let password = try readPassword(prompt: "password for \(user): ")
            let storeEndpoint = try endpoint(store, caFile: caFile)
            let tokens = TokenStore(directory: state.directory)
            let login: LoginOK = try runUntilDone(timeoutSeconds: 30, what: "the store") { loop, done in
                let link = ServerLink(loop: loop, endpoint: storeEndpoint) { Hello(role: .device, name: "securepush-device") }
                link.onDown = { error in done(.failure(describe(error, talkingTo: "store", at: store))) }
                link.start()
                link.request(.login(PushWire.Login(user: user, password: password, deviceID: deviceID))) { result in
                    link.stop()
                    switch result {
                    case .success(.loginOK(let ok)): done(.success(ok))
                    case .failure(.status(.badCredentials, _)): done(.failure(CommandFailure("wrong user name or password")))
                    case .failure(.status(.rateLimited, _)): done(.failure(CommandFailure("too many failed logins; wait a minute")))
                    case .failure(let error): done(.failure(describe(error, talkingTo: "store", at: store)))
                    case .success(let other): done(.failure(CommandFailure("unexpected reply \(other.type)")))
                    }
                }
            }
            do {
                try tokens.save(TokenStore.Saved(token: login.token, expiresAt: login.expiresAt))
            } catch {
                throw CommandFailure("cannot save the token in \(state.directory): \(error)")
            }
            announce("logged in as \(user) on \(deviceID); token valid until \(login.expiresAt) ms")
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

/// HH:MM:SS in UTC, for the notification lines.
func clockTime() -> String {
    var now = time(nil)
    var parts = tm()
    gmtime_r(&now, &parts)
    func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
}

extension String {
    var trimmingWhitespaceAndNewlines: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
