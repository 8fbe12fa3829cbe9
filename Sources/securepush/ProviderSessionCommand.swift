import ArgumentParser
import Foundation
import PushClient
import PushEventLoop
import PushSecurity
import PushWire

extension ProviderCommand {
    struct Session: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run provider commands read from stdin, one a line, and print one answer line for each as its reply arrives.",
            discussion: """
            Commands, one a line (TAG: 1 to 16 of A-Z a-z 0-9 _ -; HEX: the payload's bytes in hex; ID: 32 hex digits):

            TAG SEND USER HEX [ttl=SECONDS] [key=IDEMPOTENCY_KEY]: SEND to the store, pushed to USER's devices; answer TAG OK ID

            TAG STORE USER HEX [ttl=SECONDS]: STORE only; answer TAG OK ID

            TAG PUSH USER ID: PUSH to the gateway, to USER's devices; answer TAG OK WRITTEN QUEUED

            TAG RECALL ID: RECALL from the store; answer TAG OK

            A failure is answered TAG ERROR STATUS (BUSY, NOT_FOUND, ...), TAG ERROR DISCONNECTED when the connection \
            was lost and the outcome is unknown, and TAG ERROR INVALID for a line that does not parse (? ERROR INVALID \
            without a tag). Commands are pipelined over one connection to the store and one to the gateway, each opened \
            by the first command that needs it, so answers may come out of order. BUSY, RATE_LIMITED and INTERNAL are \
            retried a few times before they are answered. At the end of stdin the command waits for every answer, then \
            exits 0. Details of failures go to stderr.
            """)

        @Option(help: ArgumentHelp("The store's address: a host name or an IP address, and the port. \(addressListHelp)",
                                   valueName: "host:port"), transform: parseStoreAddresses)
        var store: AddressList
        @Option(help: ArgumentHelp("The gateway's address, for PUSH. \(gatewayListHelp)", valueName: "host:port"),
                transform: parseGatewayAddresses)
        var gateway: AddressList?
        @Option(help: ArgumentHelp("The provider key file (DIR/provider.key from `securepush init`).", valueName: "file"))
        var providerKey: String?
        @Option(help: ArgumentHelp("The deployment directory, whose provider.key is used (instead of --provider-key).",
                                   valueName: "directory"))
        var dataDir: String?
        @Option(help: ArgumentHelp("CA certificate (PEM) to verify TLS servers with; without it the connections are plain TCP.",
                                   valueName: "file"))
        var caFile: String?

        func validate() throws {
            guard (providerKey == nil) != (dataDir == nil) else { throw ValidationError("give exactly one of --provider-key and --data-dir") }
        }

        func run() throws {
            let keyPath = providerKey ?? ((dataDir ?? ".") + "/" + Deployment.providerKeyFile)
            let key: SecretKey
            do { key = try Deployment.readKey(keyPath) } catch { throw CommandFailure("\(error)") }
            let storeEndpoint = try endpoint(store, caFile: caFile)
            let gatewayEndpoint = try gateway.map { try endpoint($0, caFile: caFile) }
            let loop = try EventLoop()
            let client = ProviderClient(loop: loop, store: storeEndpoint, gateway: gatewayEndpoint, providerKey: key,
                                        connectWhenNeeded: true)
            client.onConnectionError = { [weak client] service, error in
                let address = service == "gateway" ? client?.gatewayAddress : client?.storeAddress
                let server = address.map { "the \(service) at \($0)" } ?? "the \(service)"
                writeStandardError("\(server): \(error)\(error.isPermanent ? "" : "; retrying")\n")
            }
            let session = ProviderSession(client: client, hasGateway: gateway != nil) { writeStandardOutputLine($0) }
            session.onFailure = { writeStandardError($0 + "\n") }
            session.onFinished = { loop.stop() }
            StandardInputLines.start(into: LoopBound(session, loop: loop))
            let stop = { loop.stop() }
            let signals = [loop.onSignal(SIGTERM, stop), loop.onSignal(SIGINT, stop)]
            unblockTerminationSignals()
            loop.run()
            signals.forEach { $0.cancel() }
            client.stop()
            loop.shutdown()
        }
    }
}

/// Reads stdin line by line on a thread of its own (stdin may be a pipe, a terminal or a
/// regular file, which the loop cannot watch) and hands each line, then the end of input,
/// to the session on its loop (`LoopBound` checks that only the loop's thread touches it).
enum StandardInputLines {
    static func start(into session: LoopBound<ProviderSession>) {
        let loop = session.handle
        let reader = Thread {
            while let line = readLine(strippingNewline: true) {
                loop.execute { session.value.received(line[...]) }
            }
            loop.execute { session.value.endOfInput() }
        }
        reader.start()
    }
}
