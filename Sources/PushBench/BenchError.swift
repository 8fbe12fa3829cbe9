/// Why a benchmark could not run at all. Failures it measured (ERROR replies, lost
/// connections) are not thrown: they are counted in the report's `errors`.
public enum BenchError: Error, Equatable, CustomStringConvertible {
    /// A setting out of range or a combination that makes no sense.
    case invalid(String)
    /// The target (temporary deployment, running services, users) could not be prepared.
    case setup(String)
    /// A child process (`securepush init`, `user add`, a service) failed.
    case child(String)
    /// Connections to the services could not be opened or were refused.
    case connect(String)
    /// A phase did not finish within its time bound.
    case timeout(String)
    /// SIGINT arrived; the run stopped and cleaned up.
    case interrupted

    public var description: String {
        switch self {
        case .invalid(let text), .setup(let text), .child(let text), .connect(let text): text
        case .timeout(let phase): "timed out: \(phase)"
        case .interrupted: "interrupted"
        }
    }
}
