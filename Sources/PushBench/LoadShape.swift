/// How much load a scenario offers and for how long: the flags every scenario shares.
///
/// `connections` counts the load-generating connections (providers for store, push,
/// fanout and e2e; devices reading from the store for fetch; the idle devices for
/// connections); `devices` counts the devices that receive pushes. `inflight` is per
/// load-generating connection (closed loop); with `rate` the load is open loop instead.
public struct LoadShape: Sendable, Equatable {
    public enum Stop: Sendable, Equatable {
        /// Seconds measured after the warm-up.
        case duration(Double)
        /// Operations measured after the warm-up.
        case count(Int)
    }

    public var connections: Int
    public var devices: Int
    public var inflight: Int
    /// Operations per second, open loop; nil for closed loop.
    public var rate: Double?
    public var stop: Stop
    public var payloadSize: Int
    public var warmupSeconds: Double

    public init(connections: Int, devices: Int, inflight: Int, rate: Double?, stop: Stop, payloadSize: Int, warmupSeconds: Double) {
        self.connections = connections
        self.devices = devices
        self.inflight = inflight
        self.rate = rate
        self.stop = stop
        self.payloadSize = payloadSize
        self.warmupSeconds = warmupSeconds
    }

    /// Every bound the bench relies on: time, memory and descriptors stay finite.
    public static let maxConnections = 60_000
    public static let maxDevices = 60_000
    /// The op table's size: correlation ids carry a 16-bit slot.
    public static let maxOutstanding = 65_536
    public static let maxRate = 10_000_000.0
    public static let maxDurationSeconds = 3_600.0
    public static let maxCount = 100_000_000
    public static let maxPayloadSize = 60_000
    public static let maxWarmupSeconds = 600.0

    public func validate() throws(BenchError) {
        guard (1...LoadShape.maxConnections).contains(connections) else {
            throw .invalid("--connections must be 1 to \(LoadShape.maxConnections)")
        }
        guard (1...LoadShape.maxDevices).contains(devices) else { throw .invalid("--devices must be 1 to \(LoadShape.maxDevices)") }
        guard inflight >= 1, connections * inflight <= LoadShape.maxOutstanding else {
            throw .invalid("--inflight must be at least 1, and --connections x --inflight at most \(LoadShape.maxOutstanding)")
        }
        if let rate {
            guard rate > 0, rate <= LoadShape.maxRate else { throw .invalid("--rate must be in (0, \(Int(LoadShape.maxRate))]") }
        }
        switch stop {
        case .duration(let seconds):
            guard seconds > 0, seconds <= LoadShape.maxDurationSeconds else {
                throw .invalid("--duration must be in (0, \(Int(LoadShape.maxDurationSeconds))]")
            }
        case .count(let count):
            guard (1...LoadShape.maxCount).contains(count) else { throw .invalid("--count must be 1 to \(LoadShape.maxCount)") }
        }
        guard (0...LoadShape.maxPayloadSize).contains(payloadSize) else {
            throw .invalid("--payload-size must be 0 to \(LoadShape.maxPayloadSize)")
        }
        guard warmupSeconds >= 0, warmupSeconds <= LoadShape.maxWarmupSeconds else {
            throw .invalid("--warmup must be in [0, \(Int(LoadShape.maxWarmupSeconds))]")
        }
    }

    /// The shape as report parameters (devices only where the scenario has them).
    func parameters(for scenario: Scenario) -> [(String, ReportValue)] {
        var list: [(String, ReportValue)] = [("connections", .integer(connections))]
        if scenario.needsGateway, scenario != .http { list.append(("devices", .integer(devices))) }
        if let rate {
            list.append(("rate", .number(rate)))
        } else {
            list.append(("inflight", .integer(inflight)))
        }
        switch stop {
        case .duration(let seconds): list.append(("duration_s", .number(seconds)))
        case .count(let count): list.append(("count", .integer(count)))
        }
        if scenario.carriesPayloads { list.append(("payload_size", .integer(payloadSize))) }
        list.append(("warmup_s", .number(warmupSeconds)))
        return list
    }
}
