// libbmpi (bm's P4Runtime/PI implementation, built with simple_switch support)
// handles P4Runtime clone sessions with dynamic_cast<SimpleSwitch *>(switch)
// and so needs the type and two methods of simple_switch's class at link time.
// flexpass_switch is not a SimpleSwitch: this unrelated class of the same name
// satisfies the linker, the cast yields nullptr for our switch, and PI answers
// clone-session requests with NOT_IMPLEMENTED_BY_TARGET (clones are
// unsupported here, see v1model.h).  Never instantiated.
class SimpleSwitch {
 public:
  struct MirroringSessionConfig;
  virtual ~SimpleSwitch();
  bool mirroring_add_session(int id, const MirroringSessionConfig &config);
  bool mirroring_delete_session(int id);
};

SimpleSwitch::~SimpleSwitch() = default;  // key function: emits the type info
bool SimpleSwitch::mirroring_add_session(int, const MirroringSessionConfig &) { return false; }
bool SimpleSwitch::mirroring_delete_session(int) { return false; }
