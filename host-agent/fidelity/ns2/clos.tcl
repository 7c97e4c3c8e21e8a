# The fidelity study's ns-2 driver: the FlexPass artifact's 192-host Clos
# (kaist-ina/ns2-flexpass scripts/large-scale.tcl, as run_simulations.py runs it) with the
# flows read from a file instead of drawn from the workload's random variables, so that the
# model and ns-2 run exactly the same flows. Every setting below is large-scale.tcl's, with
# ns2run.py's defaults; the comments name the artifact's variable where ours differs in form.
#
# Usage (from a directory holding ./outputs; the artifact's agents write outputs/fct_ID.out):
#   ns clos.tcl SCHEME DEPLOY_STEP FLOWFILE EXP_ID [END_S]
#     SCHEME       naive | owf | layering | flexpass   (artifact: -c xpass; -c xpass
#                  --xpassQueueIsolation 1 --oracleQueueWeight 1; -c gdx; -c flexpass
#                  --flexpassScheme 2)
#     DEPLOY_STEP  0, 25, 50, 75, 100: only oWF's weight and credit rate depend on it here
#                  (which flows use the new transport is the flow file's `kind`)
#     FLOWFILE     one flow per line: id start_s src dst bytes kind (kind: new | legacy)
#     EXP_ID       number of the output files
#     END_S        flows are closed at this time (default 4, as the artifact)
# Besides the artifact's outputs it writes outputs/stats_ID.out: per flow, its id, kind and
# the DCTCP retransmission timeouts of its TCP (sub-)flow (nrexmit_).

if {$argc < 4} {
  puts "usage: ns clos.tcl SCHEME DEPLOY_STEP FLOWFILE EXP_ID \[END_S\]"
  exit 1
}
set scheme [lindex $argv 0]
set deployStep [expr int([lindex $argv 1]) / 25]
set flowFile [lindex $argv 2]
set expID [expr int([lindex $argv 3])]
set simEndTime 4
if {$argc >= 5} { set simEndTime [lindex $argv 4] }

set ns [new Simulator]

# Topology and link settings (large-scale.tcl).
set linkRate 40
set linkRateHigh 100
set linkRateBw 40Gb
set linkRateHighBw 100Gb
set hostDelay 0.000002
set linkDelayHostTor 0.000004
set linkDelayTorAggr 0.000004
set linkDelayAggrCore 0.000004
set creditQueueCapacity [expr 84*10]
set creditRate [expr 64734895*4]
set creditRateHigh [expr 64734895*10]
set baseCreditRate [expr 64734895*4]
set K 65
set K_xpass 25
set KHigh [expr $K*2.5]
set B_host 1000
set B 340000 ;# enableSharedBuffer 1: "set to infinity", the Broadcom node admits
set BHigh [expr $B*2.5]
set dataQueueCapacity [expr $B * 1538]
set numCore 8
set numAggr 16
set numTor 32
set numNode 192
set xpass_queue_weight 0.5
set queue_quantum_default 1538
set actual_xpass_queue_weight 0.5
set flexpassSelDropThresh 150000 ;# ns2run.py --flexpassSelDropThresh default
set flexpassScheme 1
set tcpInitWindow 5
set flexpassReactiveInitWindow 5

switch -- $scheme {
  naive    { set ccc_type xpass;    set enable_tos_ 0; set sel_drop 0; set isolation 0 }
  owf      { set ccc_type xpass;    set enable_tos_ 1; set sel_drop 0; set isolation 1 }
  layering { set ccc_type gdx;      set enable_tos_ 0; set sel_drop 0; set isolation 0 }
  flexpass { set ccc_type flexpass; set enable_tos_ 1; set sel_drop 1; set isolation 0
             set flexpassScheme 2 }
  default  { puts "unknown scheme $scheme: naive | owf | layering | flexpass"; exit 1 }
}

if {$ccc_type == "flexpass"} {
  # The artifact's weight of the FlexPass queue net of the credit queue; it scales both the
  # switches' credit limiter and (as flexpass_beta_, below) the receivers' credit pacing.
  set actual_xpass_queue_weight [expr (1538.0-84.0)/1538 * $xpass_queue_weight]
  set creditRate [expr $creditRate * $actual_xpass_queue_weight]
  set baseCreditRate [expr $baseCreditRate * $actual_xpass_queue_weight]
  set creditRateHigh [expr $creditRateHigh * $actual_xpass_queue_weight]
} elseif {$isolation && $deployStep > 0} {
  # oWF (--oracleQueueWeight 1): weight and credit rate = the deployed fraction; at full
  # deployment the artifact keeps the credit rate whole and the queue weight at 0.5.
  set creditRate [expr $creditRate * ($deployStep/4.0)]
  set baseCreditRate [expr $baseCreditRate * ($deployStep/4.0)]
  set creditRateHigh [expr $creditRateHigh * ($deployStep/4.0)]
  set xpass_queue_weight [expr $deployStep/4.0]
  if {$xpass_queue_weight == 1} { set xpass_queue_weight 0.5 }
}

set dataBufferHost [expr 1000*1538]
set dataBufferSwitch [expr $B*1538]

# ExpressPass settings.
set alpha 0.5
set w_init 0.0625
set minJitter -0.1
set maxJitter 0.1
set minEthernetSize 78
set maxEthernetSize 1538
set minCreditSize 78
set maxCreditSize 90
set xpassHdrSize 78

file mkdir outputs
set fct_out [open "outputs/fct_$expID.out" w]
puts $fct_out "Flow ID,Flow Size (bytes),Flow Completion Time (secs)"
close $fct_out

DelayLink set avoidReordering_ true
Node set multiPath_ 1
Classifier/MultiPath set symmetric_ true
Classifier/MultiPath set nodetype_ 0
Queue/BroadcomNode set selective_dropping_threshold_ $flexpassSelDropThresh

for {set i 0} {$i < $numNode} {incr i} {
  set dcNode($i) [$ns node]
  $dcNode($i) set nodetype_ 1
}
for {set i 0} {$i < $numTor} {incr i} {
  set dcTor($i) [$ns node]
  $dcTor($i) set nodetype_ 2
  set bcmTor($i) [$ns broadcom]
}
for {set i 0} {$i < $numAggr} {incr i} {
  set dcAggr($i) [$ns node]
  $dcAggr($i) set nodetype_ 3
  set bcmAggr($i) [$ns broadcom]
}
for {set i 0} {$i < $numCore} {incr i} {
  set dcCore($i) [$ns node]
  $dcCore($i) set nodetype_ 4
  set bcmCore($i) [$ns broadcom]
}

Queue/DropTail set mean_pktsize_ 1538
Queue/DropTail set limit_ $B_host

Queue/DwrrXPassRED set queue_num_ 3
Queue/DwrrXPassRED set mean_pktsize_ 1538
Queue/DwrrXPassRED set thresh_ $K
Queue/DwrrXPassRED set maxthresh_ $K
Queue/DwrrXPassRED set mark_p_ 2.0
Queue/DwrrXPassRED set port_thresh_ $K
Queue/DwrrXPassRED set marking_scheme_ 0
Queue/DwrrXPassRED set estimate_round_alpha_ 0.75
Queue/DwrrXPassRED set estimate_round_idle_interval_bytes_ 1500
Queue/DwrrXPassRED set link_capacity_ $linkRateBw
Queue/DwrrXPassRED set deque_marking_ false
Queue/DwrrXPassRED set debug_ false
Queue/DwrrXPassRED set credit_limit_ $creditQueueCapacity
Queue/DwrrXPassRED set data_limit_ $dataQueueCapacity
Queue/DwrrXPassRED set queue_in_bytes_ true
Queue/DwrrXPassRED set limit_ [expr $dataQueueCapacity / 1538]
Queue/DwrrXPassRED set token_refresh_rate_ $creditRate
Queue/DwrrXPassRED set max_tokens_ [expr 2*84]
Queue/DwrrXPassRED set exp_id_ $expID
Queue/DwrrXPassRED set qidx_ 1
Queue/DwrrXPassRED set bytes_ false
Queue/DwrrXPassRED set setbit_ true
Queue/DwrrXPassRED set gentle_ false
Queue/DwrrXPassRED set q_weight_ 1.0
Queue/DwrrXPassRED set enable_tos_ $enable_tos_
Queue/DwrrXPassRED set enable_non_xpass_selective_dropping_ $sel_drop
Queue/DwrrXPassRED set enable_shared_buffer_ 1
Queue/DwrrXPassRED set selective_dropping_threshold_ $flexpassSelDropThresh
Queue/DwrrXPassRED set flexpass_queue_scheme_ $flexpassScheme
Queue/DwrrXPassRED set strict_high_priority_ 0

# One egress port (a DwrrXPassRED queue) as large-scale.tcl configures it. The artifact
# charges a port's bytes to the Broadcom node of the switch *behind* the link (ingress-node)
# and gives the ToR->host ports none (their queue limit is the data limit).
proc port {from to gbps delay K Kq1 B cr ingress egress} {
  global ns queue_quantum_default xpass_queue_weight dataBufferSwitch
  $ns simplex-link $from $to ${gbps}Gb $delay DwrrXPassRED
  set q [[$ns link $from $to] queue]
  $q set data_limit_ [expr $dataBufferSwitch/2]
  $q set thresh_ $K
  $q set maxthresh_ $K
  $q set limit_ $B
  if {$cr > 0} { $q set token_refresh_rate_ $cr }
  $q set-quantum 0 $queue_quantum_default
  $q set-quantum 1 [expr $queue_quantum_default*2*$xpass_queue_weight]
  $q set-quantum 2 [expr $queue_quantum_default*2*(1-$xpass_queue_weight)]
  $q set-thresh 1 $Kq1
  $q set-thresh 2 $K
  if {$gbps == 100} { $q set link_capacity_ 100Gb }
  if {$ingress != ""} { $q ingress-node $ingress }
  if {$egress != ""} { $q egress-node $egress }
  return $q
}

# Port monitors (FIDELITY_MONITOR=1 in the environment): bytes sent and packets dropped at
# every aggregation and ToR uplink and every ToR->host port (outputs/ports_ID.out).
set monitors {}
proc monitor {from to name} {
  global ns monitors env
  if {![info exists env(FIDELITY_MONITOR)]} { return }
  set qm [$ns monitor-queue $from $to ""]
  lappend monitors [list $name $qm]
}

# Aggregation-core links at 100 Gbit/s with K 2.5x and Q1's K 4x.
for {set i 0} {$i < $numAggr} {incr i} {
  for {set j [expr $i%2]} {$j < $numCore} {incr j 2} {
    port $dcAggr($i) $dcCore($j) $linkRateHigh $linkDelayAggrCore $KHigh [expr $K_xpass*4] $BHigh $creditRateHigh $bcmCore($j) $bcmAggr($i)
    monitor $dcAggr($i) $dcCore($j) "agg$i->core$j"
    port $dcCore($j) $dcAggr($i) $linkRateHigh $linkDelayAggrCore $KHigh [expr $K_xpass*4] $BHigh $creditRateHigh $bcmAggr($i) $bcmCore($j)
  }
}
for {set i 0} {$i < $numTor} {incr i} {
  set aggrIndex [expr $i/4*2]
  for {set j $aggrIndex} {$j <= $aggrIndex+1} {incr j} {
    port $dcTor($i) $dcAggr($j) $linkRate $linkDelayTorAggr $K $K_xpass $B $creditRate $bcmAggr($j) $bcmTor($i)
    monitor $dcTor($i) $dcAggr($j) "tor$i->agg$j"
    port $dcAggr($j) $dcTor($i) $linkRate $linkDelayTorAggr $K $K_xpass $B $creditRate $bcmTor($i) $bcmAggr($j)
  }
}
for {set i 0} {$i < $numNode} {incr i} {
  set t [expr $i/($numNode/$numTor)]
  # The host NIC: the host delay on this direction only; no explicit credit rate (the
  # class default, creditRate).
  port $dcNode($i) $dcTor($t) $linkRate [expr $linkDelayHostTor+$hostDelay] $K $K_xpass $B 0 $bcmTor($t) ""
  port $dcTor($t) $dcNode($i) $linkRate $linkDelayHostTor $K $K_xpass $B $creditRate "" $bcmTor($t)
  monitor $dcTor($t) $dcNode($i) "tor$t->h$i"
}

Agent/TCP set ecn_ 1
Agent/TCP set old_ecn_ 1
Agent/TCP set packetSize_ 1454
Agent/TCP set window_ 180
Agent/TCP set slow_start_restart_ false
Agent/TCP set tcpTick_ 0.000001
Agent/TCP set minrto_ 0.004
Agent/TCP set rtxcur_init_ 0.001
Agent/TCP set windowOption_ 0
Agent/TCP set tcpip_base_hdr_size_ 84
Agent/TCP set dctcp_ true
Agent/TCP set dctcp_g_ 0.0625
Agent/TCP set windowInit_ $tcpInitWindow
Agent/TCP/FullTcp set segsize_ 1454
Agent/TCP/FullTcp set segsperack_ 1
Agent/TCP/FullTcp set spa_thresh_ 3000
Agent/TCP/FullTcp set interval_ 0
Agent/TCP/FullTcp set nodelay_ true
Agent/TCP/FullTcp set state_ 0
Agent/TCP/FullTcp set exp_id_ $expID

foreach cls {Agent/XPass Agent/TCP/FullTcp/XPass Agent/TCP/FullTcp/FlexPass} {
  $cls set min_credit_size_ $minCreditSize
  $cls set max_credit_size_ $maxCreditSize
  $cls set min_ethernet_size_ $minEthernetSize
  $cls set max_ethernet_size_ $maxEthernetSize
  $cls set max_credit_rate_ $creditRate
  $cls set base_credit_rate_ $baseCreditRate
  $cls set target_loss_scaling_ 0.125
  $cls set alpha_ $alpha
  $cls set w_init_ $w_init
  $cls set min_w_ 0.01
  $cls set retransmit_timeout_ 0.0001
  $cls set min_jitter_ $minJitter
  $cls set max_jitter_ $maxJitter
  $cls set exp_id_ $expID
  $cls set default_credit_stop_timeout_ 0.001
  $cls set xpass_hdr_size_ $xpassHdrSize
}
Agent/TCP/FullTcp/FlexPass set flexpass_beta_ $actual_xpass_queue_weight
Agent/TCP/FullTcp/FlexPass set new_allocation_logic_ 1
Agent/TCP/FullTcp/FlexPass set reordering_measure_in_rc3_ 0
Agent/TCP/FullTcp/FlexPass set static_allocation_ 0
Agent/TCP/FullTcp/FlexPass set windowInit_ $flexpassReactiveInitWindow

# Toggle runs on ns-2: FIDELITY_TCL=FILE in the environment sources FILE here, after every
# default above and before the agents are created (e.g. `Agent/TCP set window_ 10000`).
if {[info exists env(FIDELITY_TCL)]} { source $env(FIDELITY_TCL) }

set newAgent(xpass) Agent/XPass
set newAgent(gdx) Agent/TCP/FullTcp/XPass
set newAgent(flexpass) Agent/TCP/FullTcp/FlexPass

set fh [open $flowFile r]
set flows {}
while {[gets $fh line] >= 0} {
  if {[string trim $line] == "" || [string index $line 0] == "#"} { continue }
  lassign $line id start src dst bytes kind
  if {$kind == "new"} {
    set cls $newAgent($ccc_type)
  } elseif {$kind == "legacy"} {
    set cls Agent/TCP/FullTcp
  } else {
    puts "$flowFile: flow $id: kind must be new or legacy, got '$kind'"
    exit 1
  }
  set sender($id) [new $cls]
  set receiver($id) [new $cls]
  foreach a [list $sender($id) $receiver($id)] {
    $a set max_credit_rate_ $creditRate
    $a set dctcp_g_ 0.0625
    $a set fid_ $id
  }
  $sender($id) set host_id_ $src
  $receiver($id) set host_id_ $dst
  $receiver($id) listen
  $ns attach-agent $dcNode($src) $sender($id)
  $ns attach-agent $dcNode($dst) $receiver($id)
  $ns connect $sender($id) $receiver($id)
  $ns at $start "$sender($id) advance-bytes [expr int($bytes)]"
  $ns at $simEndTime "$sender($id) close"
  $ns at $simEndTime "$receiver($id) close"
  lappend flows [list $id $kind]
}
close $fh

proc finish {} {
  global flows sender expID monitors
  set st [open "outputs/stats_$expID.out" w]
  puts $st "id,kind,timeouts,retransmitted_packets"
  foreach f $flows {
    lassign $f id kind
    set to 0
    set rp 0
    catch { set to [$sender($id) set nrexmit_] }
    catch { set rp [$sender($id) set nrexmitpack_] }
    puts $st "$id,$kind,$to,$rp"
  }
  close $st
  if {[llength $monitors] > 0} {
    set mo [open "outputs/ports_$expID.out" w]
    puts $mo "port,bytes_sent,packets_dropped"
    foreach m $monitors {
      lassign $m name qm
      puts $mo "$name,[$qm set bdepartures_],[$qm set pdrops_]"
    }
    close $mo
  }
  exit 0
}
$ns at [expr $simEndTime+1] "finish"
$ns run
