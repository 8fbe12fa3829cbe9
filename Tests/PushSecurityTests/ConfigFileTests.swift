import Foundation
import Testing
@testable import PushSecurity

/// A deployment directory in /tmp whose config file the test writes; removed on deinit.
private final class ConfigDirectory {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("securepush-config-\(UUID().uuidString)").path
    var configPath: String { directory + "/" + Deployment.configFile }

    init() throws { _ = try Deployment.create(at: directory) }
    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// Replaces the config file with `lines`, then opens the deployment.
    func open(_ lines: [String]) throws -> Deployment {
        try Deployment.writePrivate(configPath, lines.joined(separator: "\n") + "\n")
        return try Deployment.open(directory)
    }

    /// The failure opening a config of `lines` throws (nil when it opens).
    func failure(_ lines: [String]) -> Deployment.Failure? {
        do {
            _ = try open(lines)
            return nil
        } catch let failure as Deployment.Failure {
            return failure
        } catch {
            return nil
        }
    }
}

@Suite("The config file: one schema for validation, the default file and the help")
struct ConfigFileTests {
    @Test("the default config opens, sets the keys it writes, and names every key of the schema")
    func defaultConfig() throws {
        let temporary = try ConfigDirectory()
        let deployment = try Deployment.open(temporary.directory)
        #expect(deployment.config["store.listen"] == "127.0.0.1:7070")
        #expect(deployment.config["gateway.listen"] == "127.0.0.1:7071")
        #expect(deployment.integer("password.iterations") == PasswordHash.defaultIterations)
        #expect(deployment.config.count == ConfigSchema.keys.filter(\.inTemplate).count)
        let text = Deployment.defaultConfig
        for key in ConfigSchema.keys {
            let line = (key.inTemplate ? "" : "# ") + key.name + " = " + (key.defaultValue ?? key.example ?? "")
            #expect(text.split(separator: "\n").contains(Substring(line)), "default config lacks `\(line)`")
            if let value = key.defaultValue ?? key.example {
                #expect(ConfigSchema.problem(name: key.name, value: value) == nil, "\(key.name)'s own default is refused")
            }
        }
        // Uncommenting every key's line gives a file that opens.
        let uncommented = text.split(separator: "\n").map { line in
            let name = line.dropFirst(2).split(separator: " ").first.map(String.init) ?? ""
            let isKeyLine = line.hasPrefix("# \(name) = ") && ConfigSchema.key(named: name) != nil
            return isKeyLine ? String(line.dropFirst(2)) : String(line)
        }
        let everything = try temporary.open(uncommented)
        #expect(everything.config.count == ConfigSchema.keys.count)
    }

    @Test("an unknown key is refused with its file and line, and a close name is suggested")
    func unknownKeys() throws {
        let temporary = try ConfigDirectory()
        let path = temporary.configPath
        let failure = temporary.failure(["# comment", "store.listen = 127.0.0.1:7070", "", "store.max_payload = 10"])
        #expect(failure == .unknownKey(path, line: 4, key: "store.max_payload", suggestion: "store.max_payload_bytes"))
        #expect(failure?.description == "\(path):4: unknown key 'store.max_payload'; did you mean 'store.max_payload_bytes'?")

        let cases: [(String, String?)] = [
            ("log-level", "log_level"),
            ("gateway.max_payload_bytes", "store.max_payload_bytes"),
            ("store.queue_capacity", "gateway.queue_capacity"),
            ("Store.Listen", "store.listen"),
            ("handshake_timeout", "handshake_timeout_ms"),
            ("colour", nil),
            ("listen", "store.listen"),
            ("store.iterations", "password.iterations"),
        ]
        for (key, suggestion) in cases {
            #expect(temporary.failure(["\(key) = 1"]) == .unknownKey(path, line: 1, key: key, suggestion: suggestion), "\(key)")
        }
        #expect(temporary.failure(["colour = blue"])?.description == "\(path):1: unknown key 'colour'")
    }

    @Test("a bad value is refused naming the line, the key and what it expects")
    func badValues() throws {
        let temporary = try ConfigDirectory()
        let path = temporary.configPath
        let cases: [(line: String, expected: String)] = [
            ("store.listen = 127.0.0.1", "HOST:PORT (no :PORT)"),
            ("store.listen = ::1:7070", "HOST:PORT (an IPv6 address goes in brackets, as in [::1]:7070)"),
            ("gateway.listen = [::1]:70000", "HOST:PORT (the port must be 0 to 65535)"),
            ("gateway.listen = :7071", "HOST:PORT (the host is empty)"),
            ("gateway.listen = [::1]7071", "HOST:PORT (no :PORT after the ])"),
            ("gateway.listen = [::1:7071", "HOST:PORT (no ] after the IPv6 address)"),
            ("gateway.metrics = 127.0.0.1:http", "HOST:PORT (the port must be 0 to 65535)"),
            ("store.metrics = my host:9101", "HOST:PORT ('my host' is not a host name or address)"),
            ("store.listen =", "HOST:PORT (no :PORT)"),
            ("store.max_payload_bytes = 0", "an integer from 1 to 16776192"),
            ("store.max_payload_bytes = 4k", "an integer from 1 to 16776192"),
            ("store.token_lifetime_s = -1", "an integer from 1 to 31536000"),
            ("password.iterations = 10", "an integer from 1000 to 100000000"),
            ("gateway.max_output_bytes = 100", "an integer from 1024 to 1073741824"),
            ("handshake_timeout_ms = 0", "an integer from 1 to 3600000"),
            ("store.frame_timeout_ms = 99999999999999999999", "an integer from 1 to 3600000"),
            ("log_format = xml", "text or json"),
            ("gateway.log_level = loud", "trace, debug, info, notice, warning, error or critical"),
        ]
        for (line, expected) in cases {
            let failure = temporary.failure(["# first", line])
            let key = String(line.split(separator: "=")[0].dropLast())
            let value = line.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[1].trimmingCharacters()
            #expect(failure == .invalidValue(path, line: 2, key: key, value: value, expected: expected), "\(line)")
        }
        #expect(temporary.failure(["store.max_payload_bytes = big"])?.description
                == "\(path):1: store.max_payload_bytes = 'big': expected an integer from 1 to 16776192")
    }

    @Test("NATS keys: tls:// URLs, absolute paths and one-word names pass; credentials in a URL are refused and not repeated")
    func natsKeys() throws {
        let temporary = try ConfigDirectory()
        let deployment = try temporary.open([
            "gateway.cluster = tls://nats-1.example:4222,nats://127.0.0.1:4222",
            "gateway.nats_ca = /srv/push/nats-ca.pem",
            "gateway.nats_user = gateway",
            "gateway.nats_password_file = /srv/push/nats.password",
            "gateway.nats_server_name = nats.example",
        ])
        #expect(deployment.config["gateway.nats_user"] == "gateway")
        #expect(ConfigSchema.problem(name: "gateway.nats_ca", value: "relative/ca.pem") != nil)
        #expect(ConfigSchema.problem(name: "gateway.nats_user", value: "two words") != nil)
        #expect(ConfigSchema.problem(name: "gateway.cluster", value: "http://h:1") != nil)
        let failure = try #require(temporary.failure(["gateway.cluster = nats://gateway:s3cret@127.0.0.1:4222"]))
        #expect(failure.description.contains("credentials do not go in the URL"), "\(failure)")
        #expect(!failure.description.contains("s3cret"), "\(failure)")
    }

    @Test("good values of every kind are accepted, with comments and spacing")
    func goodValues() throws {
        let temporary = try ConfigDirectory()
        let deployment = try temporary.open([
            "  store.listen=[::1]:0   # any free port",
            "gateway.listen = localhost:7071",
            "gateway.metrics = [fe80::1%eth0]:9100",
            "store.metrics = metrics-host.example:9101",
            "log_format = json",
            "store.log_level = debug",
            "store.keepalive_ms = 0",
            "gateway.max_output_bytes = 1024",
        ])
        #expect(deployment.config["store.listen"] == "[::1]:0")
        #expect(deployment.value("log_format", for: .gateway) == "json")
        #expect(deployment.value("log_level", for: .store) == "debug")
        #expect(deployment.value("log_level", for: .gateway) == nil)
        #expect(deployment.value("metrics", for: .gateway) == "[fe80::1%eth0]:9100")
        #expect(deployment.integer("keepalive_ms", for: .store) == 0)
    }

    @Test("a prefixed shared key wins over the bare one for its service only")
    func sharedKeys() throws {
        let temporary = try ConfigDirectory()
        let deployment = try temporary.open(["handshake_timeout_ms = 100", "gateway.handshake_timeout_ms = 200"])
        #expect(deployment.integer("handshake_timeout_ms", for: .store) == 100)
        #expect(deployment.integer("handshake_timeout_ms", for: .gateway) == 200)
    }

    @Test("a key set twice and a line without = are refused")
    func duplicatesAndSyntax() throws {
        let temporary = try ConfigDirectory()
        let path = temporary.configPath
        let twice = temporary.failure(["store.listen = 127.0.0.1:1", "", "store.listen = 127.0.0.1:2"])
        #expect(twice == .duplicateKey(path, line: 3, key: "store.listen", firstLine: 1))
        #expect(twice?.description == "\(path):3: store.listen is already set on line 1")
        #expect(temporary.failure(["log_format json"]) == .malformedConfig(path, line: 1))
        #expect(temporary.failure(["= json"]) == .malformedConfig(path, line: 1))
        // The bare and the prefixed key are two settings, not one set twice.
        #expect(temporary.failure(["log_level = info", "store.log_level = debug"]) == nil)
    }
}

@Suite("Messages for missing files")
struct MissingFileTests {
    @Test("a missing directory, or one without server.key, suggests `securepush init`; a missing file is named as missing")
    func messages() throws {
        let temporary = try ConfigDirectory()
        let absent = temporary.directory + "-absent"
        #expect(throws: Deployment.Failure.notADeployment(absent, missing: absent)) { try Deployment.open(absent) }
        #expect(Deployment.Failure.notADeployment(absent, missing: absent).description
                == "\(absent): no such directory; create the deployment with `securepush init \(absent)`")

        let empty = temporary.directory + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: false)
        #expect(throws: Deployment.Failure.notADeployment(empty, missing: empty + "/server.key")) { try Deployment.open(empty) }
        #expect(Deployment.Failure.notADeployment(empty, missing: empty + "/server.key").description
                == "\(empty) is not a securepush deployment (no server.key); create one with `securepush init \(empty)`")

        let providerKey = temporary.directory + "/" + Deployment.providerKeyFile
        try FileManager.default.removeItem(atPath: providerKey)
        #expect(throws: Deployment.Failure.missing(providerKey)) { try Deployment.open(temporary.directory) }
        #expect(Deployment.Failure.missing(providerKey).description == "\(providerKey): no such file")

        let credential = temporary.directory + "/phone.cred"
        #expect(throws: Deployment.Failure.missing(credential)) { try Deployment.readFile(credential) }
    }

    @Test("a deployment without a config file opens on the defaults")
    func noConfigFile() throws {
        let temporary = try ConfigDirectory()
        try FileManager.default.removeItem(atPath: temporary.configPath)
        #expect(try Deployment.open(temporary.directory).config.isEmpty)
    }
}

@Suite("The schema rendered for people")
struct ConfigDocsTests {
    @Test("each service's help lists its keys and only those, in lines a help formatter keeps")
    func helpText() {
        for service in ConfigService.allCases {
            let lines = ConfigSchema.helpText(for: service)
            let text = lines.joined(separator: "\n")
            for line in lines { #expect(line.count <= 78, "too long: \(line)") }
            for key in ConfigSchema.keys {
                let shown = text.contains(key.displayName(for: service) + " = ")
                #expect(shown == key.services.contains(service), "\(service) help and \(key.name)")
            }
        }
        let store = ConfigSchema.helpText(for: .store).joined(separator: "\n")
        #expect(store.contains("""
              store.max_payload_bytes = 1 to 16776192 bytes
                  Largest payload a STORE may carry. Default 4096; flag --max-payload.
            """))
        #expect(store.contains("  [store.]log_format = text or json\n"))
        #expect(store.contains("  store.metrics = HOST:PORT\n      Serve /metrics, /healthz and /readyz over HTTP at this address. Off"))
    }

    @Test("the Markdown table has a row per key")
    func markdown() {
        let rows = ConfigSchema.markdownTable.split(separator: "\n")
        #expect(rows.count == ConfigSchema.keys.count + 2)
        #expect(rows.contains("| `gateway.queue_capacity` | 1 to 1000000 | `100` | `--queue-capacity` | Pushes queued per offline device; the oldest goes when it is full. |"))
    }

    @Test("suggestions come from a real edit distance")
    func editDistance() {
        #expect(ConfigSchema.editDistance("kitten", "sitting") == 3)
        #expect(ConfigSchema.editDistance("", "abc") == 3)
        #expect(ConfigSchema.editDistance("same", "same") == 0)
    }
}
