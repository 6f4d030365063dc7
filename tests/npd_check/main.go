// Reads a custom plugin monitor config the way node-problem-detector's custom plugin monitor loads it
// (pkg/custompluginmonitor/custom_plugin_monitor.go: json.Unmarshal, ApplyConfiguration, Validate), using NPD's
// own types package, built by tests/test_kube_npd.py from NPD's source at the pinned commit. Prints "ok" or the
// error NPD would log, exit 0 / 1.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	cpmtypes "k8s.io/node-problem-detector/pkg/custompluginmonitor/types"
)

func main() {
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	var config cpmtypes.CustomPluginConfig
	if err := json.Unmarshal(data, &config); err != nil {
		fmt.Println("unmarshal:", err)
		os.Exit(1)
	}
	if err := (&config).ApplyConfiguration(); err != nil {
		fmt.Println("apply:", err)
		os.Exit(1)
	}
	if err := config.Validate(); err != nil {
		fmt.Println("validate:", err)
		os.Exit(1)
	}
	fmt.Printf("ok interval=%v timeout=%v rules=%d concurrency=%d\n", *config.PluginGlobalConfig.InvokeInterval,
		*config.PluginGlobalConfig.Timeout, len(config.Rules), *config.PluginGlobalConfig.Concurrency)
}
