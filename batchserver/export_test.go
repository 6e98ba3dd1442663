package batchserver

// CallsDirectly reports whether the plugin calls service.method without
// reflect (see directCall).
func CallsDirectly(p *Plugin, service, methodName string) bool {
	m, _ := p.services.lookup(service, methodName)
	return m != nil && m.direct != nil
}
