import ArgumentParser
import KernelKeychain
import Keyrings

// Tab completion of what is stored, as `pass show <Tab>` completes: the shell scripts
// that `kc --generate-completion-script` writes call `kc ---completion …` for these
// arguments, which runs the functions below. They print nothing but names: an empty
// keychain, a locked vault or a keyring error completes nothing, silently.

/// Completes a service: the caller's own services.
@Sendable func storedServiceNames(_ words: [String], _ index: Int, _ prefix: String) -> [String] {
    completable((try? Keychain.services()) ?? [])
}

/// Completes an item of the service named just before it on the command line.
@Sendable func storedItemNames(_ words: [String], _ index: Int, _ prefix: String) -> [String] {
    guard let service = words.prefix(max(0, min(index, words.count))).last(where: { !$0.hasPrefix("-") }),
          let names = try? Keychain(service: KeyName(service)).itemNames()
    else { return [] }
    return completable(names)
}

/// Names a shell can offer as they are. bash's script hands the list to `compgen -W`,
/// which expands each word as the shell would: a stored name holding `$(…)` or a
/// backtick would run as a command in the user's shell at a Tab. So a name is offered
/// only if it holds no character any of the three shells gives a meaning to there
/// (quotes, `$`, backtick, backslash, braces, globs, a leading `~`), no control
/// character, and is UTF-8; others are typed out (`kc ls` shows them).
private func completable(_ names: [KeyName]) -> [String] {
    names.compactMap { name in
        guard let text = String(validating: name.bytes, as: UTF8.self), !text.hasPrefix("~"),
              !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || shellSpecial.contains($0) })
        else { return nil }
        return text
    }
}

private let shellSpecial: Set<Unicode.Scalar> = ["$", "`", "\\", "\"", "'", "{", "}", "*", "?", "[", "]", "!", "<", ">", "|", "&", ";", "(", ")"]
