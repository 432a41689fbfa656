import Keyrings

/// Which service each unit's credentials come from in `kc credential-server`: the
/// unit's own (`--unit-service UNIT=SERVICE`), else the default (`--service`).
public struct ServedServices: Sendable {
    /// The service of every unit without one of its own (`--service`), if any.
    public var fallback: KeyName?
    /// Each unit's own service (`--unit-service UNIT=SERVICE`), by unit name.
    public var units: [String: KeyName]

    /// Serves `units` from their own services, and every other unit from `fallback`.
    public init(fallback: KeyName?, units: [String: KeyName]) {
        self.fallback = fallback
        self.units = units
    }

    /// The service `unit` is served from; nil if none is.
    public func service(for unit: String) -> KeyName? { units[unit] ?? fallback }
}
