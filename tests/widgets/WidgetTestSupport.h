// Helpers shared by the widget tests: reading a named child's text, waiting for a signal with the event loop
// running, a MainWindow whose errors are collected instead of shown in a modal box, and evaluation settings
// small enough for a ref-tiny run.
#pragma once

#include <gtest/gtest.h>

#include <QDir>
#include <QFile>
#include <QObject>
#include <QCoreApplication>
#include <QSettings>
#include <QSignalSpy>
#include <QString>
#include <QStringList>
#include <string>

#include "SharedData.h"
#include "app/gui/MainWindow.h"
#include "widgets/EvaluationPanel.h"

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

// Fresh settings, and a fresh experiment database for this test alone (PARETO_DB, which the window's worker
// records runs in and reads its history from).
class SettingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QSettings().clear();
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dbPath_ = QDir::temp().filePath(QStringLiteral("pareto-widgets-%1-%2-%3.db")
                                        .arg(QCoreApplication::applicationPid())
                                        .arg(info->test_suite_name(), info->name()));
    removeDatabase();
    previousDb_ = qgetenv("PARETO_DB");
    qputenv("PARETO_DB", dbPath_.toUtf8());
  }
  void TearDown() override {
    qputenv("PARETO_DB", previousDb_);
    removeDatabase();
  }
  void removeDatabase() const {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) QFile::remove(dbPath_ + suffix);
  }
  std::string dbPath() const { return dbPath_.toStdString(); }

  QString dbPath_;
  QByteArray previousDb_;
};

// Evaluation settings small enough that a ref-tiny run takes seconds: perplexity over 4 windows of 64 tokens of the
// held-out prose; fidelity and drift over 4 prompts, 12 new tokens each; no Hessian study. Tests change what they
// test from there.
inline EvaluationSettings quickEvaluation(const QString& runsFolder) {
  EvaluationSettings s;
  s.heldOutText = QString::fromStdString(sharedPath("data/heldout-prose.txt"));
  s.perplexityWindow = 64;
  s.perplexityMaxWindows = 4;
  s.prompts = QString::fromStdString(sharedPath("data/prompts-prose.txt"));
  s.maxPrompts = 4;
  s.maxNewTokens = 12;
  s.driftSteps = 12;
  s.hessianStudy = false;
  s.studyTokens = 128;
  s.runsFolder = runsFolder;
  return s;
}

}  // namespace pareto::test
