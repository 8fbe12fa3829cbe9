import Testing
@testable import PushBench
