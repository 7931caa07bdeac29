;; The tx-pipeline scenario's state-transition function: a counter update.
;;
;; `apply(old, amount)` returns `old + amount` as unsigned 64-bit integers and traps
;; (`unreachable`) when the sum overflows, so that a bad update can never be written back.
;; The host compiles this file with the `wat` crate; SHA-256 over the compiled bytes is the
;; module hash that client payloads name.
(module
  (func (export "apply") (param $old i64) (param $amount i64) (result i64)
    (local $new i64)
    (local.set $new (i64.add (local.get $old) (local.get $amount)))
    (if (i64.lt_u (local.get $new) (local.get $old))
      (then unreachable))
    (local.get $new)))
