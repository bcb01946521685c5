// Helpers shared by the widget tests: reading a named child's text, waiting for a signal with the event loop
// running, and a MainWindow whose errors are collected instead of shown in a modal box.
#pragma once

#include <gtest/gtest.h>

#include <QObject>
#include <QSettings>
#include <QSignalSpy>
#include <QString>
#include <QStringList>
#include <string>

#include "app/gui/MainWindow.h"

namespace pareto::test {

inline std::string str(const QString& s) { return s.toStdString(); }

// The "text" property of a named child (QLabel and QLineEdit both have one).
inline QString textOf(const QObject* root, const char* name) {
  const QObject* child = root->findChild<QObject*>(name);
  if (child == nullptr) {
    ADD_FAILURE() << "no child named " << name;
    return {};
  }
  return child->property("text").toString();
}

// Waits (event loop running) until the spy has recorded `count` signals or `timeoutMs` passes.
inline bool waitForSignals(QSignalSpy& spy, int count = 1, int timeoutMs = 120000) {
  while (spy.count() < count)
    if (!spy.wait(timeoutMs)) return spy.count() >= count;
  return true;
}

struct TestWindow {
  TestWindow() {
    window.setErrorReporter([this](const QString& title, const QString& message) { errors << title + ": " + message; });
  }
  MainWindow window;
  QStringList errors;
};

class SettingsTest : public ::testing::Test {
 protected:
  void SetUp() override { QSettings().clear(); }
};

}  // namespace pareto::test
