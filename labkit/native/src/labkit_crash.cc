// A crash report a person can read: when the server process gets SIGSEGV, SIGABRT (abort(), an
// uncaught C++ exception, a failed assert), SIGBUS, SIGFPE or SIGILL, this handler writes the stack
// as library + offset lines to stderr (the server's log), then ends the process with that signal
// (Triton's own handler is not called: it can deadlock, see on_crash).
//
// Triton 2.41's own backtrace shows absolute addresses without the libraries' load addresses, so
// it cannot be mapped to source lines afterwards; library + offset can (labkit.native.symbols runs
// addr2line on the library, whose line tables carry the cell's line numbers). The format:
//
//   labkit-crash: signal 11 SIGSEGV
//   labkit-frame: pc /path/libtriton_x.so+0x1a2b      <- where it stopped
//   labkit-frame: ret /path/libtriton_x.so+0x1c00     <- return addresses, innermost first
//
// Installed when the library is loaded. Triton never unloads a backend library, so a handler
// installed by an earlier build stays valid; the first labkit library installs it and later ones
// leave it in place (one report, not one per build).
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

namespace {

constexpr int kSignals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
constexpr int kMaxFrames = 64;
// Blocked while the handler runs, and the way a later library recognises the handler as labkit's:
// no other handler blocks these two job-control signals, which a server never receives anyway.
constexpr int kMarkers[] = {SIGTTIN, SIGTTOU};

volatile sig_atomic_t reporting = 0;

// Only write(2) from here on: the process is in an unknown state.
void put(const char* text) {
  size_t left = strlen(text);
  while (left > 0) {
    ssize_t n = write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

void put_number(unsigned long value, int base) {
  char digits[32];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value % base];
    value /= base;
  } while (value > 0 && n < 31);
  char text[34];
  int k = 0;
  if (base == 16) {
    text[k++] = '0';
    text[k++] = 'x';
  }
  while (n > 0) text[k++] = digits[--n];
  text[k] = '\0';
  put(text);
}

void put_frame(const char* kind, void* address) {
  Dl_info info;
  put("labkit-frame: ");
  put(kind);
  put(" ");
  if (dladdr(address, &info) != 0 && info.dli_fname != nullptr) {
    put(info.dli_fname);
    put("+");
    put_number(reinterpret_cast<unsigned long>(address) - reinterpret_cast<unsigned long>(info.dli_fbase), 16);
  } else {
    put("?+");
    put_number(reinterpret_cast<unsigned long>(address), 16);
  }
  put("\n");
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    default: return "signal";
  }
}

void report(int sig, void* context) {
  put("labkit-crash: signal ");
  put_number(static_cast<unsigned long>(sig), 10);
  put(" ");
  put(signal_name(sig));
  put("\n");
  void* pc = nullptr;
#if defined(__x86_64__)
  pc = reinterpret_cast<void*>(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  pc = reinterpret_cast<void*>(static_cast<ucontext_t*>(context)->uc_mcontext.pc);
#endif
  void* frames[kMaxFrames];
  const int count = backtrace(frames, kMaxFrames);
  // The first frames are this handler and the kernel's signal trampoline: start at the
  // interrupted instruction when the unwinder found it, else right after the trampoline.
  int start = -1;
  for (int i = 0; i < count; ++i) {
    if (frames[i] == pc) start = i;
  }
  if (start < 0) {
    if (pc != nullptr) put_frame("pc", pc);
    start = count > 2 ? 2 : count;
  } else {
    put_frame("pc", frames[start++]);
  }
  for (int i = start; i < count; ++i) put_frame("ret", frames[i]);
}

void on_crash(int sig, siginfo_t* info, void* context) {
  if (!reporting) {  // a second fault inside the report must not loop
    reporting = 1;
    report(sig, context);
  }
  // End the process the default way, with this signal, without chaining to Triton's own handler:
  // Triton 2.41's prints its backtrace with code that is not async-signal-safe and was seen here to
  // deadlock (a crash inside malloc or stdio), leaving a server that never answers again.
  (void)info;
  signal(sig, SIG_DFL);
  raise(sig);
}

bool installed_by_labkit(const struct sigaction& action) {
  for (int marker : kMarkers) {
    if (sigismember(&action.sa_mask, marker) != 1) return false;
  }
  return (action.sa_flags & SA_SIGINFO) != 0;
}

__attribute__((constructor)) void install_crash_handler() {
  struct sigaction current;
  if (sigaction(SIGSEGV, nullptr, &current) == 0 && installed_by_labkit(current)) return;
  void* warm[1];
  backtrace(warm, 1);  // the first call loads the unwinder (malloc, dlopen): not in a signal handler
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_sigaction = on_crash;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  for (int marker : kMarkers) sigaddset(&action.sa_mask, marker);
  for (int sig : kSignals) sigaction(sig, &action, nullptr);
}

}  // namespace
