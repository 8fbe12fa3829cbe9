import ArgumentParser
import PushBench

struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Load tests; results go to stdout as a table or, with --json, one JSON object.",
        subcommands: [Echo.self])

    struct Echo: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Framed echo over loopback through the event loop (client and server threads in this process).")

        @Option(help: "Frames kept in flight on the one connection.") var inflight = 64
        @Option(help: "Body bytes per frame (the 16-byte header comes on top).") var payloadSize = 16
        @Option(help: "Seconds measured.") var duration = 5.0
        @Option(help: "Seconds run before measuring.") var warmup = 1.0
        @Flag(help: "Print one JSON object instead of a table.") var json = false

        func validate() throws {
            guard (1...100_000).contains(inflight) else { throw ValidationError("--inflight must be 1 to 100000") }
            guard (0...60_000).contains(payloadSize) else { throw ValidationError("--payload-size must be 0 to 60000") }
            guard duration > 0, duration <= 600, warmup >= 0, warmup <= 60 else {
                throw ValidationError("--duration must be in (0, 600] and --warmup in [0, 60]")
            }
        }

        func run() throws {
            let report = try EchoBenchmark(inflight: inflight, payloadSize: payloadSize, warmupSeconds: warmup, durationSeconds: duration).run()
            print(json ? report.json : report.text)
        }
    }
}
